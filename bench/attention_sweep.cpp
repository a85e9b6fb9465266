// `ulysses bench attention --sweep | --quick | --points`: the run, the PyTorch peers, the table.
#include "bench/attention_sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/attn_flops.hpp"
#include "reports/file_out.hpp"
#include "reports/format.hpp"
#include "reports/table.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"

#ifdef ULYSSES_WITH_CUDA
#include "bench/bench.hpp"
#endif

namespace ulysses::bench {

namespace {

#ifdef ULYSSES_WITH_CUDA  // the rest of this namespace serves run_attention_sweep's CUDA body

// Device seconds of the sweep before it runs, from the FLOPs at assumed rates (TFLOP/s, about
// what docs/ATTENTION.md measured on H200) and each side's repetition rule.
std::pair<double, double> estimate_s(const std::vector<AttnPoint>& pts, const SweepRequest& s, bool peer) {
  double ours = 0, peers = peer ? 15 : 0;  // torch import and CUDA start
  for (const AttnPoint& p : pts) {
    const AttnFlops fl = attn_flops(1, p.S, p.H, p.H_kv, p.D, p.causal);
    const double f = fl.fwd, tf = f / 300e12, tb = fl.bwd / 250e12;
    ours += tf + tb + std::max(s.min_reps * tf, s.min_time_s) + std::max(s.min_reps * tb, s.min_time_s) + 0.05;
    if (!peer) continue;
    // attn_peer.py bench_ms: one warm-up, then 1..1000 repetitions filling --min-time-s (ours); the backward
    // pass needs one more forward for its graph
    auto pass = [&](double t) { return t + std::max(1, std::min(1000, static_cast<int>(s.min_time_s / std::max(t, 1e-6)))) * t; };
    for (auto [rf, rb] : {std::pair{300e12, 270e12}, {450e12, 430e12}})
      peers += pass(f / rf) + f / rf + pass(fl.bwd / rb) + 0.02;
  }
  return {ours, peers};
}

struct PeerTimes {
  double fwd_ms = 0, bwd_ms = 0;
  std::string error;
};

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>;
Key key_of(const AttnPoint& p) { return {p.S, p.H, p.H_kv, p.D, p.causal}; }

struct PeerRun {
  bool ran = false;
  std::string failure;  // one line when it did not run or failed
  std::map<Key, std::map<std::string, PeerTimes>> times;  // impl -> times
  double wall_s = 0;
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string last_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last;
}

// bench/peers/attn_peer.py bench --one ... for every point, in one process; JSON lines parsed.
PeerRun run_peer(const std::string& python, const std::vector<AttnPoint>& pts, double min_time_s) {
  PeerRun r;
  const std::string script = repo_dir() + "/bench/peers/attn_peer.py";
  char err_path[] = "/tmp/ulysses-attn-peer-XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd < 0) {
    r.failure = "cannot create a temporary file for the peer's stderr";
    return r;
  }
  close(fd);
  std::string cmd = shell_quote(python) + " " + shell_quote(script) + fmt::format(" bench --min-time-s {}", min_time_s);
  for (const AttnPoint& p : pts)
    cmd += fmt::format(" --one {} {} {} {} {}", p.S, p.H, p.H_kv, p.D, p.causal ? 1 : 0);
  cmd += " 2>" + shell_quote(err_path);
  std::cout << "peer: " << python << " " << script << " bench --one ... (" << pts.size() << " points)\n" << std::flush;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    r.failure = "cannot start '" + python + "'";
    std::remove(err_path);
    return r;
  }
  std::string line;
  int lines = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    auto j = nlohmann::json::parse(line, nullptr, false);
    line.clear();
    if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "bench") continue;
    const AttnPoint p{j.value("S", std::int64_t{0}), j.value("Hq", std::int64_t{0}), j.value("Hkv", std::int64_t{0}),
                      j.value("D", std::int64_t{0}), j.value("causal", false)};
    PeerTimes t;
    t.fwd_ms = j.value("fwd_ms", 0.0), t.bwd_ms = j.value("bwd_ms", 0.0), t.error = j.value("error", "");
    const std::string impl = j.value("impl", "");
    r.times[key_of(p)][impl] = t;
    ++lines;
    std::cout << fmt::format("  peer {} {}: {}\n", impl, attn_point_name(p),
                             t.error.empty() ? fmt::format("fwd {:.0f} bwd {:.0f} TFLOP/s", j.value("fwd_tflops", 0.0),
                                                           j.value("bwd_tflops", 0.0))
                                             : "refused: " + t.error.substr(0, 80))
              << std::flush;
  }
  const int status = pclose(f);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc != 0 || lines == 0) {
    const std::string why = last_line(err_path);
    r.failure = fmt::format("exit code {}, {} result lines{}{}", rc, lines, why.empty() ? "" : ": ", why);
  }
  r.ran = lines > 0;
  std::remove(err_path);
  return r;
}

std::string tflops_cell(double flops, double s) { return s > 0 ? fmt::format("{:.0f}", flops / s * 1e-12) : "-"; }

#endif

}  // namespace

#ifndef ULYSSES_WITH_CUDA

int run_attention_sweep(const SweepRequest&) {
  std::fprintf(stderr, "ulysses bench: this binary was built without the CUDA backend\n");
  return core::kExitFailure;
}

#else

int run_attention_sweep(const SweepRequest& req) {
  const SweepRequest& set = req;
  const std::vector<AttnPoint>& points = req.points;
  const bool peer = req.peer;
  const auto [est_ours, est_peer] = estimate_s(points, set, peer);
  std::cout << fmt::format(
      "bench attention sweep: {} points, B=1, one GPU, flash kernel (heads are the local heads)\n"
      "TFLOP/s: fwd 4*S^2*H*D (half when causal), bwd 2.5x fwd; ours = median of >= {} repetitions and >= {} s per pass\n"
      "validation per point: fp64 oracle at S=min(S,{}) with the same H, H_kv, D, causal (outputs poisoned), then at full S\n"
      "  no NaN left in o, dq, dk, dv and spot rows of o, lse, dq vs fp64; #wrong = both; exit 1 if any point fails\n"
      "  |err| <= tol*(|ref|+rms(ref)), tol 2^-6 for o and 2^-5 for the flash gradients (bf16 P and dS, as FA2)\n"
      "estimated device time: ours ~{:.0f} s{}\n\n",
      points.size(), set.min_reps, set.min_time_s, set.check_seq, est_ours,
      peer ? fmt::format(", PyTorch peers ~{:.0f} s, total ~{:.0f} s", est_peer, est_ours + est_peer) : std::string(" (no peer)"));
  std::cout << std::flush;

  AttnSweepOptions opt;
  opt.min_reps = set.min_reps, opt.min_time_s = set.min_time_s, opt.check_seq = set.check_seq;
  opt.seed = req.seed;
  opt.timeout_s = req.timeout_s;
  if (!(opt.timeout_s > 0)) throw core::InputError("", "--timeout", "must be > 0 seconds");
  std::string device;
  std::size_t done = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto rows = bench_attention_sweep(
      points, opt,
      [&](const AttnSweepRow& r) {
        ++done;
        std::cout << fmt::format("  [{}/{}] {} fwd {} bwd {} TFLOP/s, #wrong {}, {} ({:.1f} s)\n", done, points.size(),
                                 attn_point_name(points[done - 1]), tflops_cell(r.fwd_flops, r.fwd_s),
                                 tflops_cell(r.bwd_flops, r.bwd_s), r.wrong, r.status, r.wall_s)
                  << std::flush;
      },
      &device);
  const double ours_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  PeerRun pr;
  if (peer) {
    // our buffers are freed point by point (only the CUDA context stays); run the peer now
    std::vector<AttnPoint> runnable;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i].fwd_s > 0) runnable.push_back(points[i]);
    if (!runnable.empty()) pr = run_peer(req.peer_python, runnable, req.min_time_s);
  }

  // ---- the table ----
  std::cout << fmt::format("\n{} - ours {:.0f} s{}\n", device, ours_wall_s,
                           pr.ran ? fmt::format(", peers {:.0f} s", pr.wall_s) : std::string());
  if (peer && !pr.failure.empty())
    std::cout << "peer: FAILED (" << pr.failure << "); " << (pr.ran ? "partial peer numbers" : "our numbers only") << "\n";
  if (!peer) std::cout << "peer: not run (--no-peer)\n";
  reports::Table t({{"S", ""}, {"H", ""}, {"Hkv", ""}, {"D", ""}, {"causal", ""},
                    {"ours fwd", "TFLOP/s"}, {"FA2 fwd", "TFLOP/s"}, {"cuDNN fwd", "TFLOP/s"},
                    {"ours bwd", "TFLOP/s"}, {"FA2 bwd", "TFLOP/s"}, {"cuDNN bwd", "TFLOP/s"},
                    {"fwd/FA2", "x"}, {"bwd/FA2", "x"}, {"fwd/cuDNN", "x"}, {"bwd/cuDNN", "x"},
                    {"#wrong", ""}, {"status", "", reports::Align::left}});
  // gmean accumulators: [D][all | S >= 16K][ratio 0..3] -> (sum of logs, count)
  std::map<std::int64_t, std::array<std::array<std::pair<double, int>, 4>, 2>> gm;
  nlohmann::json jrows = nlohmann::json::array();
  std::ostringstream csv;
  csv << "S,H,H_kv,D,causal,status,wrong,ours_fwd_ms,ours_bwd_ms,ours_fwd_tflops,ours_bwd_tflops,fwd_reps,bwd_reps,"
         "fa2_fwd_ms,fa2_bwd_ms,fa2_fwd_tflops,fa2_bwd_tflops,cudnn_fwd_ms,cudnn_bwd_ms,cudnn_fwd_tflops,cudnn_bwd_tflops,"
         "fwd_over_fa2,bwd_over_fa2,fwd_over_cudnn,bwd_over_cudnn,check\n";
  bool ok = true;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const AttnPoint& p = points[i];
    const bool oom = r.status.rfind("out of memory", 0) == 0;
    if (r.wrong != 0 && !oom) ok = false;
    const auto pk = pr.times.find(key_of(p));
    auto peer_of = [&](const char* impl) -> std::optional<PeerTimes> {
      if (pk == pr.times.end() || !pk->second.count(impl)) return std::nullopt;
      return pk->second.at(impl);
    };
    const auto fa2 = peer_of("torch_flash"), cud = peer_of("torch_cudnn");
    auto peer_s = [](const std::optional<PeerTimes>& x, bool bwd) { return x && x->error.empty() ? (bwd ? x->bwd_ms : x->fwd_ms) * 1e-3 : 0.0; };
    const double ours[2] = {r.fwd_s, r.bwd_s};
    const double peers_s[2][2] = {{peer_s(fa2, false), peer_s(fa2, true)}, {peer_s(cud, false), peer_s(cud, true)}};
    double ratio[4];  // ours / peer in TFLOP/s = peer time / our time
    for (int b = 0; b < 2; ++b)
      for (int pass = 0; pass < 2; ++pass) {
        const double o = ours[pass], q = peers_s[b][pass];
        ratio[b * 2 + pass] = o > 0 && q > 0 ? q / o : 0;
        if (ratio[b * 2 + pass] > 0 && r.wrong == 0)
          for (int g = 0; g < (p.S >= 16384 ? 2 : 1); ++g) {
            auto& acc = gm[p.D][g][b * 2 + pass];
            acc.first += std::log(ratio[b * 2 + pass]), acc.second += 1;
          }
      }
    auto rc = [](double x) { return x > 0 ? fmt::format("{:.2f}", x) : std::string("-"); };
    const std::string S_cell = reports::human_tokens(p.S);
    std::string status = r.status;
    for (const auto& [name, x] : {std::pair{"FA2", fa2}, {"cuDNN", cud}})
      if (x && !x->error.empty()) status += fmt::format("; {} refused: {}", name, x->error.substr(0, 60));
    t.add_row({S_cell, fmt::format("{}", p.H), fmt::format("{}", p.H_kv), fmt::format("{}", p.D), p.causal ? "yes" : "no",
               tflops_cell(r.fwd_flops, r.fwd_s), tflops_cell(r.fwd_flops, peers_s[0][0]), tflops_cell(r.fwd_flops, peers_s[1][0]),
               tflops_cell(r.bwd_flops, r.bwd_s), tflops_cell(r.bwd_flops, peers_s[0][1]), tflops_cell(r.bwd_flops, peers_s[1][1]),
               rc(ratio[0]), rc(ratio[1]), rc(ratio[2]), rc(ratio[3]), r.wrong >= 0 ? fmt::format("{}", r.wrong) : "-", status});
    auto side = [&](double f_s, double b_s) -> nlohmann::json {
      if (!(f_s > 0)) return nullptr;
      return {{"fwd_ms", f_s * 1e3}, {"bwd_ms", b_s * 1e3}, {"fwd_tflops", r.fwd_flops / f_s * 1e-12},
              {"bwd_tflops", b_s > 0 ? r.bwd_flops / b_s * 1e-12 : 0.0}};
    };
    nlohmann::json jo = side(r.fwd_s, r.bwd_s);
    if (!jo.is_null()) jo["fwd_reps"] = r.fwd_reps, jo["bwd_reps"] = r.bwd_reps;
    jrows.push_back({{"S", p.S}, {"H", p.H}, {"H_kv", p.H_kv}, {"D", p.D}, {"causal", p.causal}, {"status", r.status},
                     {"wrong", r.wrong}, {"check", r.check}, {"wall_s", r.wall_s}, {"fwd_flops", r.fwd_flops},
                     {"bwd_flops", r.bwd_flops}, {"ours", jo},
                     {"torch_flash", fa2 && !fa2->error.empty() ? nlohmann::json{{"error", fa2->error}} : side(peers_s[0][0], peers_s[0][1])},
                     {"torch_cudnn", cud && !cud->error.empty() ? nlohmann::json{{"error", cud->error}} : side(peers_s[1][0], peers_s[1][1])},
                     {"fwd_over_fa2", ratio[0]}, {"bwd_over_fa2", ratio[1]}, {"fwd_over_cudnn", ratio[2]}, {"bwd_over_cudnn", ratio[3]}});
    auto ms = [](double s) { return s > 0 ? fmt::format("{:.4f}", s * 1e3) : std::string(); };
    auto tf = [](double fl, double s) { return s > 0 ? fmt::format("{:.1f}", fl / s * 1e-12) : std::string(); };
    auto rr = [](double x) { return x > 0 ? fmt::format("{:.4f}", x) : std::string(); };
    std::string check = r.check + (r.status == "ok" ? "" : " " + r.status);
    std::replace(check.begin(), check.end(), ',', ';');
    csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},", p.S, p.H, p.H_kv, p.D, p.causal ? 1 : 0, r.status == "ok" ? "ok" : "fail",
                       r.wrong, ms(r.fwd_s), ms(r.bwd_s), tf(r.fwd_flops, r.fwd_s), tf(r.bwd_flops, r.bwd_s), r.fwd_reps, r.bwd_reps)
        << fmt::format("{},{},{},{},{},{},{},{},", ms(peers_s[0][0]), ms(peers_s[0][1]), tf(r.fwd_flops, peers_s[0][0]),
                       tf(r.bwd_flops, peers_s[0][1]), ms(peers_s[1][0]), ms(peers_s[1][1]), tf(r.fwd_flops, peers_s[1][0]),
                       tf(r.bwd_flops, peers_s[1][1]))
        << fmt::format("{},{},{},{},{}\n", rr(ratio[0]), rr(ratio[1]), rr(ratio[2]), rr(ratio[3]), check);
  }
  std::cout << t.render();

  if (!gm.empty()) {
    std::cout << "\nsummary: geometric mean of ours / peer (TFLOP/s ratio) over the validated points\n";
    reports::Table s({{"D", ""}, {"points", "", reports::Align::left}, {"n", ""}, {"fwd/FA2", "x"}, {"bwd/FA2", "x"},
                      {"fwd/cuDNN", "x"}, {"bwd/cuDNN", "x"}});
    for (auto it = gm.rbegin(); it != gm.rend(); ++it)
      for (int g = 0; g < 2; ++g) {
        const auto& a = it->second[g];
        int n = 0;
        std::vector<std::string> cells{fmt::format("{}", it->first), g == 0 ? "all" : "S >= 16K", ""};
        for (const auto& [sum, cnt] : a) {
          cells.push_back(cnt > 0 ? fmt::format("{:.2f}", std::exp(sum / cnt)) : "-");
          n = std::max(n, cnt);
        }
        cells[2] = fmt::format("{}", n);
        if (n > 0) s.add_row(cells);
      }
    std::cout << s.render();
  }
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].status != "ok")
      std::cout << fmt::format("{}: {} {}\n", attn_point_name(points[i]), rows[i].status, rows[i].check);
  std::cout << (ok ? "validation: all points passed\n" : "validation: FAILED (a point has #wrong > 0 or could not run)\n");

  if (!req.json_path.empty())
    reports::write_file_atomic(req.json_path,
                               nlohmann::json{{"device", device}, {"ours_wall_s", ours_wall_s}, {"peer_ran", pr.ran},
                                              {"peer_failure", pr.failure}, {"peer_wall_s", pr.wall_s}, {"min_reps", set.min_reps},
                                              {"min_time_s", set.min_time_s}, {"check_seq", set.check_seq}, {"rows", jrows}}
                                       .dump(2) + "\n");
  if (!req.csv_path.empty()) reports::write_file_atomic(req.csv_path, csv.str());
  return ok ? core::kExitOk : core::kExitFailure;
}

#endif

}  // namespace ulysses::bench
