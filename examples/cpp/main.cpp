// Reads queries "codebook mode M N K" from stdin (# starts a comment) and prints the kernel the
// generated tables pick for each, as a launcher would use it: the candidate (family, tile,
// threads per column) and the K-blocks per partition (bpp) that fixes the arithmetic. The Rust
// example prints the same lines for the same tables.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "vnni_dispatch.h"

namespace vd = vnni_dispatch;

static const char* via_name(vd::Via via) {
  switch (via) {
    case vd::Via::kOverlay: return "overlay";
    case vd::Via::kTree: return "tree";
    case vd::Via::kModel: return "model";
    default: return "none";
  }
}

// What a caller does when the tables refuse a query.
static const char* refusal(vd::Status status) {
  switch (status) {
    case vd::Status::kBadShape:
      return "bad shape (M, N or K zero or >= 2^31, or K not a multiple of 32): not a quantized matmul these kernels run";
    case vd::Status::kUnknownCodebook:
      return "unknown codebook: the tables were not built for this weight format; fall back to the reference kernel";
    case vd::Status::kUnknownMode:
      return "unknown mode: use one the policy was timed in (its `modes`, e.g. graph)";
    default:
      return "no selection: a validated table never answers this; report it";
  }
}

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string codebook, mode;
    int64_t m = 0, n = 0, k = 0;
    if (!(in >> codebook >> mode >> m >> n >> k)) {
      std::cerr << "not a query: " << line << "\n";
      return 2;
    }
    // One entry point per surface; `select` would route by M just the same.
    vd::Selection s = m == 1  ? vd::select_decode(codebook.c_str(), mode.c_str(), n, k)
                      : m < 32 ? vd::select_grouped(codebook.c_str(), mode.c_str(), m, n, k)
                               : vd::select_prefill(codebook.c_str(), mode.c_str(), m, n, k);
    std::cout << codebook << " " << mode << " M=" << m << " N=" << n << " K=" << k << " -> ";
    if (s.status != vd::Status::kOk) {
      std::cout << "refused: " << refusal(s.status) << "\n";
      continue;
    }
    const vd::Candidate& c = *s.candidate;
    std::cout << c.id << " (family " << c.family << ", tile " << c.tile << ") bpp=" << s.bpp
              << " partitions=" << s.partitions << " via " << via_name(s.via) << "\n";
  }
  return 0;
}
