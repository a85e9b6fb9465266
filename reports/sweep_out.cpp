// Sweep output names, the CSV + summary commit, and the merge of sweep shards (reports/sweep_out.hpp).
#include "reports/sweep_out.hpp"
#include "sim/fs_query.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "reports/file_out.hpp"
#include "reports/json_in.hpp"
#include "core/errors.hpp"

namespace ulysses::reports {

namespace fs = std::filesystem;

std::string sweep_output_stem(const std::string& name, const Shard* shard) {
  return shard ? fmt::format("{}.shard-{}-of-{}", name, shard->index, shard->count) : name;
}

void commit_sweep_outputs(AtomicFile& csv, const std::string& summary_path, const std::string& summary_text) {
  AtomicFile summary(summary_path);
  summary.write(summary_text);
  csv.finish();  // both complete and on disk before either is renamed
  summary.finish();
  if (std::remove(summary_path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot replace '" + summary_path + "': " + std::strerror(errno));
  csv.commit();
  summary.commit();
}

namespace {

struct ShardFile {
  std::string summary_path, csv_path;
  Json j;
  std::int64_t index = 0, count = 0, first = 0, end = 0, total = 0;
};

ShardFile read_shard(const fs::path& summary_path, const std::string& name, const std::string& k, const std::string& n) {
  ShardFile f;
  f.summary_path = summary_path.string();
  f.csv_path = (summary_path.parent_path() / (name + ".shard-" + k + "-of-" + n + ".csv")).string();
  f.j = read_json_file(f.summary_path);
  const JsonIn in(f.j, f.summary_path);
  if (in.at("name").str() != name) in.at("name").fail("must be '" + name + "', the name in the file name");
  in.at("spec_fnv1a64").str();
  in.at("version").object();
  in.at("phase_columns").array();
  for (const char* key : {"points", "valid", "skipped_total", "passes"}) in.at(key).integer(0, INT64_MAX);
  in.at("threads").integer(1, INT64_MAX);
  in.at("elapsed_s").number_in(0, false, 1e300, false, "a non-negative number of seconds");
  const JsonIn skipped = in.at("skipped");
  skipped.object();
  for (auto it = skipped.json().begin(); it != skipped.json().end(); ++it) skipped.at(it.key()).integer(0, INT64_MAX);
  const JsonIn sh = in.at("shard");
  f.count = sh.at("count").integer(1, kMaxShards);
  f.index = sh.at("index").integer(1, f.count);
  f.total = sh.at("points_total").integer(0, INT64_MAX);
  f.first = sh.at("first_point").integer(0, f.total);
  f.end = sh.at("end_point").integer(f.first, f.total);
  if (std::to_string(f.index) != k || std::to_string(f.count) != n)
    sh.fail(fmt::format("says shard {}/{}, the file name {}/{}", f.index, f.count, k, n));
  const auto expect = shard_points(f.total, Shard{f.index, f.count});
  if (expect.first != f.first || expect.second != f.end || in.at("points").integer(0, INT64_MAX) != f.end - f.first)
    sh.fail(fmt::format("points {}..{} are not slice {} of {} of {} points", f.first, f.end, f.index, f.count, f.total));
  if (!path_is_file(f.csv_path)) throw core::InputError(f.csv_path, "file", "missing: the CSV of " + f.summary_path);
  return f;
}

// Appends the rows of one shard CSV (without its header) to out; checks the header and row count.
void copy_rows(const ShardFile& f, const std::string& header, AtomicFile& out, bool with_header) {
  std::ifstream in(f.csv_path, std::ios::binary);
  std::string first_line;
  if (!in || !std::getline(in, first_line)) throw core::InputError(f.csv_path, "file", "cannot read, or empty");
  first_line += '\n';
  if (first_line != header) throw core::InputError(f.csv_path, "header", "differs from the first shard's CSV header");
  if (with_header) out.write(header);
  std::int64_t rows = 0;
  std::string buf(1 << 20, '\0');
  char last = '\n';
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    for (std::size_t i = 0; i < got; ++i) rows += buf[i] == '\n';
    last = buf[got - 1];
    out.write(std::string_view(buf.data(), got));
  }
  if (in.bad()) throw core::InputError(f.csv_path, "file", "read error");
  const std::int64_t points = f.end - f.first;
  if (last != '\n' || rows != points)
    throw core::InputError(f.csv_path, "rows", fmt::format("holds {} complete rows, its summary {} points (a truncated file?)", rows, points));
}

}  // namespace

MergedSweep merge_sweep_shards(const std::vector<std::string>& dirs, const std::string& out_dir) {
  static const std::regex kShardName(R"((.+)\.shard-([0-9]+)-of-([0-9]+)\.summary\.json)");
  std::vector<ShardFile> found;
  for (const auto& d : dirs) {
    if (!path_is_dir(d)) throw core::InputError(d, "DIR", "no such folder (sweep merge takes the folders of the shards)");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      std::smatch m;
      const std::string fname = p.filename().string();
      if (std::regex_match(fname, m, kShardName)) found.push_back(read_shard(p, m[1], m[2], m[3]));
    }
  }
  std::string where;
  for (const auto& d : dirs) where += (where.empty() ? "" : " ") + d;
  if (found.empty()) throw core::InputError(where, "shard files", "no <name>.shard-K-of-N.summary.json found");
  const ShardFile& ref = found.front();
  const std::string name = ref.j["name"];
  std::map<std::int64_t, const ShardFile*> by_index;
  for (const auto& f : found) {
    const JsonIn in(f.j, f.summary_path);
    auto same = [&](const char* key, const std::string& what) {
      if (f.j[key] != ref.j[key])
        in.at(key).fail(fmt::format("{} differs from {} ({} vs {}): shards of different sweeps", what, ref.summary_path,
                                    f.j[key].dump(), ref.j[key].dump()));
    };
    same("name", "the sweep name");
    same("spec_fnv1a64", "the spec fingerprint");
    same("version", "the tool version");
    same("phase_columns", "the phase columns");
    if (f.count != ref.count)
      in.at("shard").at("count").fail(fmt::format("{} shards, {} says {}", f.count, ref.summary_path, ref.count));
    const auto [it, fresh] = by_index.emplace(f.index, &f);
    if (!fresh)
      in.at("shard").at("index").fail(fmt::format("shard {}/{} also in {}", f.index, f.count, it->second->summary_path));
  }
  std::string missing;
  for (std::int64_t k = 1; k <= ref.count; ++k)
    if (!by_index.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  if (!missing.empty())
    throw core::InputError(where, "shard files", fmt::format("missing shard(s) {} of {} of sweep '{}'", missing, ref.count, name));

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw core::InputError("", "--out", "cannot create '" + out_dir + "': " + ec.message());
  MergedSweep r;
  r.csv_path = (fs::path(out_dir) / (name + ".csv")).string();
  r.summary_path = (fs::path(out_dir) / (name + ".summary.json")).string();
  const LockFile lock((fs::path(out_dir) / (name + ".lock")).string());

  std::string header;
  {
    std::ifstream in(ref.csv_path, std::ios::binary);
    if (!std::getline(in, header)) throw core::InputError(ref.csv_path, "file", "cannot read, or empty");
    header += '\n';
  }
  AtomicFile csv(r.csv_path);
  std::int64_t valid = 0, skipped_total = 0, passes = 0, threads = 1;
  double elapsed = 0;
  std::map<std::string, std::int64_t> skipped;
  for (const auto& [k, f] : by_index) {
    copy_rows(*f, header, csv, k == 1);
    valid += f->j["valid"].get<std::int64_t>();
    skipped_total += f->j["skipped_total"].get<std::int64_t>();
    passes = std::max(passes, f->j["passes"].get<std::int64_t>());
    threads = std::max(threads, f->j["threads"].get<std::int64_t>());
    elapsed += f->j["elapsed_s"].get<double>();
    for (auto it = f->j["skipped"].begin(); it != f->j["skipped"].end(); ++it) skipped[it.key()] += it.value().get<std::int64_t>();
  }
  std::vector<std::pair<std::string, std::int64_t>> sorted(skipped.begin(), skipped.end());
  sort_skipped(sorted);
  Json skipped_json = Json::object();
  for (const auto& [reason, n] : sorted) skipped_json[reason] = n;

  // The unsharded run's summary has the shard's keys, in the same order, without "shard".
  Json s = ref.j;
  s.erase("shard");
  r.points = ref.total;
  r.shards = ref.count;
  s["points"] = ref.total;
  s["valid"] = valid;
  s["skipped_total"] = skipped_total;
  s["skipped"] = skipped_json;
  s["elapsed_s"] = elapsed;  // summed over the shards: compute time, not wall time
  s["points_per_s"] = elapsed > 0 ? static_cast<double>(ref.total) / elapsed : 0.0;
  s["threads"] = threads;
  s["passes"] = passes;
  s["csv"] = r.csv_path;
  r.summary = s;
  commit_sweep_outputs(csv, r.summary_path, s.dump(2) + "\n");
  return r;
}

}  // namespace ulysses::reports
