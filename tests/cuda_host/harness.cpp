// Runs the decode and dot functions of kernels/cuda/codebook.cuh on the CPU (see
// intrinsics.h) for tests/tests/cuda_host.rs.
//   harness blocks IN OUT   IN: records (below); OUT: per record, little-endian:
//     decode<CB>'s 8 words, decode_pair<CB>'s (lo, hi) for t = 0..3, block_dots<CB> after
//     prepare_act<CB> (2 x i32), block_term<CB> (f32 bits)
//   harness h2f OUT         OUT: h2f of every 16-bit pattern (f32 bits)
// A record: codebook id (u32), payload (32 bytes, the codebook's first PB used), activations
// (32 x i8), their scale (f32), their exact sum (i32), scale bits (u16), second bits (u16).
#include <cstdio>
#include <vector>

#include "intrinsics.h"
#define VNNI_HOST_EMULATION 1
#include "codebook.cuh"

using namespace vnni;

struct Record {
  uint32_t codebook;
  unsigned char payload[32];
  signed char act[32];
  float act_scale;
  int32_t act_sum;
  uint16_t scale, second;
};

template <class T>
static void put(std::vector<unsigned char>& out, T v) {
  unsigned char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.insert(out.end(), b, b + sizeof v);
}

template <int CB>
static void run(const Record& r, std::vector<unsigned char>& out) {
  const Raw raw = load_raw<CB>(r.payload, 0);
  int w[8];
  decode<CB>(raw, w);
  for (int i = 0; i < 8; ++i) put(out, w[i]);
  for (int t = 0; t < 4; ++t) {
    u32 lo, hi;
    decode_pair<CB, false>(r.payload, t, lo, hi);
    put(out, lo);
    put(out, hi);
  }
  ActBlock x = load_act(r.act, &r.act_scale, &r.act_sum, 0);
  prepare_act<CB>(x);
  const int2 d = block_dots<CB>(raw, x);
  put(out, d.x);
  put(out, d.y);
  const float s = scale_of<CB>(r.scale), second = Codebook<CB>::SECOND ? h2f(r.second) : 0.0f;
  const float c = block_term<CB>(raw, s, second, x);
  uint32_t bits;
  std::memcpy(&bits, &c, sizeof bits);
  put(out, bits);
}

static bool dispatch(const Record& r, std::vector<unsigned char>& out) {
  switch (r.codebook) {
    case CB_S4: run<CB_S4>(r, out); return true;
    case CB_NL4: run<CB_NL4>(r, out); return true;
    case CB_U4: run<CB_U4>(r, out); return true;
    case CB_S5: run<CB_S5>(r, out); return true;
    case CB_U5: run<CB_U5>(r, out); return true;
    case CB_S6D: run<CB_S6D>(r, out); return true;
    case CB_S8: run<CB_S8>(r, out); return true;
    case CB_E2M1: run<CB_E2M1>(r, out); return true;
    case CB_S3D: run<CB_S3D>(r, out); return true;
    case CB_NL3: run<CB_NL3>(r, out); return true;
    case CB_O4: run<CB_O4>(r, out); return true;
    case CB_U2M: run<CB_U2M>(r, out); return true;
    case CB_NL2: run<CB_NL2>(r, out); return true;
    case CB_NL2D: run<CB_NL2D>(r, out); return true;
  }
  return false;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "h2f") == 0) {
    std::vector<unsigned char> out;
    for (unsigned h = 0; h < 65536; ++h) {
      const float f = vnni_host::h2f((unsigned short)h);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      put(out, bits);
    }
    FILE* o = std::fopen(argv[2], "wb");
    return o && std::fwrite(out.data(), 1, out.size(), o) == out.size() && std::fclose(o) == 0 ? 0 : 1;
  }
  if (argc != 4 || std::strcmp(argv[1], "blocks") != 0) {
    std::fprintf(stderr, "usage: harness blocks IN OUT | harness h2f OUT\n");
    return 2;
  }
  FILE* in = std::fopen(argv[2], "rb");
  if (!in) return 1;
  std::vector<unsigned char> out;
  unsigned char buf[4 + 32 + 32 + 4 + 4 + 2 + 2];
  while (std::fread(buf, 1, sizeof buf, in) == sizeof buf) {
    Record r;
    size_t o = 0;
    std::memcpy(&r.codebook, buf + o, 4); o += 4;
    std::memcpy(r.payload, buf + o, 32); o += 32;
    std::memcpy(r.act, buf + o, 32); o += 32;
    std::memcpy(&r.act_scale, buf + o, 4); o += 4;
    std::memcpy(&r.act_sum, buf + o, 4); o += 4;
    std::memcpy(&r.scale, buf + o, 2); o += 2;
    std::memcpy(&r.second, buf + o, 2);
    if (!dispatch(r, out)) {
      std::fprintf(stderr, "unknown codebook id %u\n", r.codebook);
      return 3;
    }
  }
  std::fclose(in);
  FILE* o = std::fopen(argv[3], "wb");
  return o && std::fwrite(out.data(), 1, out.size(), o) == out.size() && std::fclose(o) == 0 ? 0 : 1;
}
