// The tables' definitions: include the generated .inc in exactly one translation unit.
#include "vnni_dispatch.inc"
