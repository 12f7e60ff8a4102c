// Validation harness for a generated .inc: prints the candidate table, then answers every
// query of the file named by argv[1] (`codebook mode m n k` per line, indices; -1 is an
// unknown name), one line each, in the text the generator compares with its evaluator.
#include "vnni_dispatch.inc"

#include <cinttypes>
#include <cstdio>

namespace {

namespace vd = vnni_dispatch;

const char* surface_name(vd::Surface s) {
  switch (s) {
    case vd::Surface::kDecode: return "decode";
    case vd::Surface::kGrouped: return "grouped";
    case vd::Surface::kPrefill: return "prefill";
  }
  return "?";
}

const char* kb_name(vd::KbKind k) {
  switch (k) {
    case vd::KbKind::kWide: return "wide";
    case vd::KbKind::kLiteral: return "literal";
    case vd::KbKind::kWaves: return "waves";
    case vd::KbKind::kInherited: return "inherited";
    case vd::KbKind::kCapped: return "capped";
  }
  return "?";
}

const char* status_name(vd::Status s) {
  switch (s) {
    case vd::Status::kOk: return "ok";
    case vd::Status::kBadShape: return "bad_shape";
    case vd::Status::kUnknownCodebook: return "unknown_codebook";
    case vd::Status::kUnknownMode: return "unknown_mode";
    case vd::Status::kNoSelection: return "no_selection";
  }
  return "?";
}

template <typename T, size_t N>
const char* name_at(T (&names)[N], long long i) {
  return (i >= 0 && i < static_cast<long long>(N)) ? names[i] : "(unknown)";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: harness QUERIES\n");
    return 2;
  }
  std::FILE* in = std::fopen(argv[1], "r");
  if (in == nullptr) {
    std::perror(argv[1]);
    return 2;
  }
  static char buffer[1 << 20];
  std::setvbuf(stdout, buffer, _IOFBF, sizeof(buffer));
  for (const vd::Candidate& c : vd::detail::kCandidates) {
    std::printf("candidate %s %s %s %" PRId64 " %" PRId64 " %" PRId64 " %s %" PRId64 " %" PRId64 " %d\n", c.id,
                c.family, surface_name(c.surface), c.tile, c.cpt, c.rows, kb_name(c.kb_kind), c.kb_param, c.max_kb,
                c.generic_legal ? 1 : 0);
  }
  long long cb = 0, mode = 0, m = 0, n = 0, k = 0;
  while (std::fscanf(in, "%lld %lld %lld %lld %lld", &cb, &mode, &m, &n, &k) == 5) {
    const char* cb_name = name_at(vd::detail::kCodebooks, cb);
    const char* mode_name = name_at(vd::detail::kModes, mode);
    // Each entry point on the M range it is meant for.
    const vd::Selection s = m == 1  ? vd::select_decode(cb_name, mode_name, n, k)
                            : m < 32 ? vd::select_grouped(cb_name, mode_name, m, n, k)
                                     : vd::select_prefill(cb_name, mode_name, m, n, k);
    if (s.status != vd::Status::kOk) {
      std::printf("%s\n", status_name(s.status));
      continue;
    }
    const char* via = s.via == vd::Via::kOverlay ? "overlay" : (s.via == vd::Via::kModel ? "model" : "tree");
    std::printf("ok %s %s %s %" PRId64 " %" PRId64 " %s %d\n", s.candidate->id, s.candidate->family,
                surface_name(s.candidate->surface), s.bpp, s.partitions, via, s.domain);
  }
  std::fclose(in);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
