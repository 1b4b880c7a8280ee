// Runs the emulation's Cast, half arithmetic and float Exp/Ln on values the test chooses, so
// test_emulator_numerics.py can compare them with numpy and ml_dtypes bit by bit.
//
// stdin: uint32 n (a multiple of 128), then n float32 x, then n float32 y.
// stdout, each array n long: x to half with CAST_NONE, RINT, FLOOR, CEIL, ROUND, TRUNC, ODD;
// x to bfloat16 with CAST_RINT, FLOOR, CEIL, ROUND, TRUNC (all as uint16 bits); Exp(x) and
// Ln(x) in float; Add, Sub, Mul, Div of half(x) and half(y) (uint16 bits).
#include <cstdio>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

namespace {

template <typename T>
void Write(const LocalTensor<T>& t, uint32_t n)
{
    std::fwrite(t.Data("probe output", n, false), sizeof(T), n, stdout);
}

template <typename T>
void Narrow(const LocalTensor<float>& x, const LocalTensor<T>& out, RoundMode mode, uint32_t n)
{
    Cast(out, x, mode, n);
    Write(out, n);
}

}  // namespace

int main()
{
    uint32_t n = 0;
    if (std::fread(&n, sizeof n, 1, stdin) != 1 || n == 0 || n % 128 != 0 || n > 4096) {
        std::fprintf(stderr, "numerics probe: bad length\n");
        return 2;
    }
    std::vector<float> host(2 * static_cast<size_t>(n));
    if (std::fread(host.data(), sizeof(float), host.size(), stdin) != host.size()) {
        std::fprintf(stderr, "numerics probe: truncated input\n");
        return 2;
    }
    lossgrad_emu::state().kernel = "numerics_probe";
    GM_ADDR device = static_cast<GM_ADDR>(lossgrad_emu::GmAlloc(host.size() * sizeof(float)));
    std::memcpy(device, host.data(), host.size() * sizeof(float));
    GlobalTensor<float> xGm, yGm;
    xGm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(device), n);
    yGm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(device) + n, n);

    TPipe pipe;
    TBuf<QuePosition::VECCALC> xBuf, yBuf, fBuf, hBuf, aBuf, bBuf;
    for (auto* b : {&xBuf, &yBuf, &fBuf}) pipe.InitBuffer(*b, n * sizeof(float));
    for (auto* b : {&hBuf, &aBuf, &bBuf}) pipe.InitBuffer(*b, n * sizeof(half));
    LocalTensor<float> x = xBuf.Get<float>(), y = yBuf.Get<float>(), f = fBuf.Get<float>();
    LocalTensor<half> h = hBuf.Get<half>(), a = aBuf.Get<half>(), b = bBuf.Get<half>();
    DataCopy(x, xGm, n);
    DataCopy(y, yGm, n);

    for (RoundMode mode : {RoundMode::CAST_NONE, RoundMode::CAST_RINT, RoundMode::CAST_FLOOR, RoundMode::CAST_CEIL,
                           RoundMode::CAST_ROUND, RoundMode::CAST_TRUNC, RoundMode::CAST_ODD}) {
        Narrow(x, h, mode, n);
    }
    LocalTensor<bfloat16_t> bf = hBuf.Get<bfloat16_t>();
    for (RoundMode mode : {RoundMode::CAST_RINT, RoundMode::CAST_FLOOR, RoundMode::CAST_CEIL, RoundMode::CAST_ROUND,
                           RoundMode::CAST_TRUNC}) {
        Narrow(x, bf, mode, n);
    }
    Exp(f, x, n);
    Write(f, n);
    Ln(f, x, n);
    Write(f, n);
    Cast(a, x, RoundMode::CAST_RINT, n);
    Cast(b, y, RoundMode::CAST_RINT, n);
    Add(h, a, b, n);
    Write(h, n);
    Sub(h, a, b, n);
    Write(h, n);
    Mul(h, a, b, n);
    Write(h, n);
    Div(h, a, b, n);
    Write(h, n);
    return 0;
}
