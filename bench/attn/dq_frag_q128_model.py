#!/usr/bin/env python3
# python3 bench/attn/dq_frag_q128_model.py -- model of variant 245760's dq_accum layout: the kernel's writes (staging in fragment order + one bulk reduction per
# full 128-row tile and warpgroup; atomics into the tail rows of a partial tile) and bwd_convert_dq_frag<64, 128>'s reads.
# Formulas mirror kernels/attention_flash_sm90a.hpp (dq_frag_q128_block / _tail_row),
# kernels/attention_flash_bwd_sm90a_d64_q128.cuh (sm90a_stage_dq<32>, dq_atomics_tail_q128) and
# kernels/attention_flash_bwd_tiles.cuh (bwd_convert_dq_frag<64, 128>), run_bwd's grid.
import sys

def block(b, h, mt, wg, H, S): return ((b * H + h) * (S // 128) + mt) * (128 * 64) + wg * (64 * 64)
def tail_row(b, h, r, B, H, S): return B * H * (S // 128) * (128 * 64) + ((b * H + h) * (S % 128) + r) * 64

def check(B, H, S):
    N = B * H * S * 64
    owner = [None] * N
    tiles, rem = S // 128, S % 128
    for b in range(B):
        for h in range(H):
            for mt in range((S + 127) // 128):          # every q tile a CTA visits (causal: a suffix of these)
                m0 = mt * 128
                for wg in (0, 1):
                    blk_base = block(b, h, m0 // 128, wg, H, S)
                    if m0 + 128 <= S: assert blk_base % 4 == 0 and blk_base % (16384 // 4) == 0  # 16 KiB aligned
                    for tw in range(128):
                        w4, g, t = tw >> 5, (tw & 31) >> 2, tw & 3
                        for p in range(16):             # dq[2p], dq[2p+1] = dq[4j + 2hr + e]
                            j, hr = p >> 1, p & 1
                            row = m0 + 64 * wg + 16 * w4 + g + 8 * hr
                            for e in (0, 1):
                                col = 8 * j + 2 * t + e
                                if m0 + 128 <= S:       # staged at (p * 128 + tw) * 8 bytes, block copied as is
                                    addr = blk_base + (p * 128 + tw) * 2 + e
                                else:                    # dq_atomics_tail_q128
                                    r = m0 + wg * 64 + w4 * 16 + g + hr * 8 - (S // 128) * 128
                                    if not r < S % 128:
                                        assert row >= S
                                        continue
                                    addr = tail_row(b, h, r, B, H, S) + 2 * t + 8 * j + e
                                    assert (addr - e) % 2 == 0  # float2 atomics 8-byte aligned
                                assert row < S, (S, row)
                                assert 0 <= addr < N and owner[addr] is None, (S, addr)
                                owner[addr] = (b, h, row, col)
    assert all(o is not None for o in owner), "writes cover dq_accum"
    # the conversion
    blocks = B * H * tiles * 2
    grid = blocks + (B * H * rem * 32 + 255) // 256
    read = [0] * N
    out = {}
    ld = H * 32
    for cta in range(grid):
        for x in range(256):
            if cta < blocks:
                blk, = (cta,)
                wg, tile = blk & 1, blk >> 1
                mt, bh = tile % tiles, tile // tiles
                b, h = bh // H, bh % H
                tw = x & 127; w4, g, t = tw >> 5, (tw & 31) >> 2, tw & 3
                src = blk * (64 * 64 // 2)
                for k in range(8):
                    p = 2 * k + (x >> 7)
                    f2 = src + p * 128 + tw
                    row = mt * 128 + wg * 64 + w4 * 16 + g + 8 * (p & 1); c2 = (p >> 1) * 4 + t
                    pair = (b * S + row) * ld + h * 32 + c2
                    for e in (0, 1):
                        read[2 * f2 + e] += 1
                        assert pair * 2 + e not in out; out[pair * 2 + e] = (b, h, row, 2 * c2 + e, 2 * f2 + e)
            else:
                j = (cta - blocks) * 256 + x
                if rem == 0 or j >= B * H * rem * 32: continue
                r, c2 = j >> 5, j & 31
                bh = r // rem; b, h = bh // H, bh % H
                f2 = blocks * (64 * 64 // 2) + j
                row = tiles * 128 + r % rem
                pair = (b * S + row) * ld + h * 32 + c2
                for e in (0, 1):
                    read[2 * f2 + e] += 1
                    assert pair * 2 + e not in out; out[pair * 2 + e] = (b, h, row, 2 * c2 + e, 2 * f2 + e)
    assert all(c == 1 for c in read), "every dq_accum float read exactly once"
    assert len(out) == N, "every dq element written once"
    for idx, (b, h, row, col, addr) in out.items():
        assert idx == ((b * S + row) * H + h) * 64 + col      # dq [B, S, H, 64] index
        assert owner[addr] == (b, h, row, col), (S, addr, owner[addr], (b, h, row, col))
    return N, grid

for S in [1, 63, 64, 127, 128, 129, 300, 1024]:
    for B, H in [(1, 1), (2, 3)]:
        N, grid = check(B, H, S)
        print(f"S={S:5d} B={B} H={H}: {N} floats, each written once and read once, conversion grid {grid}: ok")
