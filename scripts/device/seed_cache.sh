# Sourced once CACHE is set: with SEED_CACHE naming a carried cubin cache (made on the build
# machine by `vnni-dispatch preflight --static --arch sm_90 --cache DIR`, NVRTC 13.0.88 like the
# GPU machine's), copy it in so the call spends no device time compiling kernels. Cubins are
# keyed by source, options, NVRTC version and arch, so a stale one is never used.
if [ -n "${SEED_CACHE:-}" ]; then
  mkdir -p "$CACHE" && { cp -n "$SEED_CACHE"/* "$CACHE"/ 2>/dev/null || true; }  # some cp -n exit 1 on a skip
fi
