# Sourced by setup.sh and build_llama_server.sh: sets NO_AMX to the compiler flags that leave
# out AMX kernels, or to nothing where they do not apply (not x86-64, or a compiler too old to
# know AMX, which then compiles none anyway).
# Why: ggml's AMX matrix multiply (compiled in by -march=native where the CPU has AMX)
# segfaulted on the bundled model's first batch (2026-12-04, a Xeon with amx_int8, kernel 6.18),
# so neither llama-server nor llama-cpp-python could serve; AVX-512/VNNI serve it instead. An
# explicit -mno-* wins over -march=native whatever the order.
NO_AMX=""
if [ "$(uname -m)" = x86_64 ] \
  && echo 'int main(void){return 0;}' | "${CC:-cc}" -mno-amx-tile -x c -o /dev/null - 2>/dev/null; then
  NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
