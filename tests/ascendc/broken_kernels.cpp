// Kernels that break one hardware rule each; test_emulator_checks.py runs them by name and
// expects the emulator to stop with a message naming the kernel, the instruction and the rule.
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "kernel_operator.h"

using namespace AscendC;

namespace {

constexpr uint32_t kTile = 256;

GM_ADDR Device(uint64_t bytes) { return static_cast<GM_ADDR>(lossgrad_emu::GmAlloc(bytes)); }

void Bf16Arithmetic()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(bfloat16_t));
    LocalTensor<bfloat16_t> t = buf.Get<bfloat16_t>();
    Duplicate(t, ToBfloat16(1.0f), kTile);
    Mul(t, t, t, kTile);
}

void CastToBf16WithoutRounding()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> a, b;
    pipe.InitBuffer(a, kTile * sizeof(float));
    pipe.InitBuffer(b, kTile * sizeof(bfloat16_t));
    LocalTensor<float> x = a.Get<float>();
    LocalTensor<bfloat16_t> y = b.Get<bfloat16_t>();
    Duplicate(x, 1.0f, kTile);
    Cast(y, x, RoundMode::CAST_NONE, kTile);
}

void UnalignedOperand()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Adds(t[3], t[3], 1.0f, 64);  // 12 bytes past a 32-byte boundary
}

void OutsideItsBuffer()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Muls(t, t, 2.0f, kTile + 64);
}

void QueueDepth()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.AllocTensor<float>();
    LocalTensor<float> b = q.AllocTensor<float>();
    q.EnQue(a);
    q.EnQue(b);  // depth 1: the first one has not been dequeued
}

void UseAfterFree()
{
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.AllocTensor<float>();
    q.FreeTensor(a);
    Duplicate(a, 0.0f, kTile);
}

void DequeEmpty()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.DeQue<float>();
    (void)a;
}

void TooManyQueueBuffers()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q0, q1, q2, q3, q4;
    for (auto* q : {&q0, &q1, &q2, &q3, &q4}) {
        pipe.InitBuffer(*q, 2, kTile * sizeof(float));  // 5 x 2 > 8 VECIN buffers
    }
}

void SelectWithoutScratch()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> big, mask;
    pipe.InitBuffer(mask, 256);
    pipe.InitBuffer(big, 196608 - 256 - 1024);  // leaves less than Select's 8 KiB
    LocalTensor<float> t = big.Get<float>();
    LocalTensor<uint8_t> m = mask.Get<uint8_t>();
    Duplicate(t, 1.0f, 64);
    Compares(m, t, 1.0f, CMPMODE::EQ, 64);
    Select(t, m, t, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, 64);
}

void GlobalOutOfBounds()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(100 * sizeof(float))));
    DataCopy(buf.Get<float>(), g[64], 64);  // elements [64, 128) of a 100-element tensor
}

void UbOverflow()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, 100000);  // 200000 bytes > 196608
}

}  // namespace

int main(int argc, char** argv)
{
    const std::map<std::string, std::function<void()>> kernels = {
        {"bf16_arithmetic", Bf16Arithmetic},
        {"cast_to_bf16_without_rounding", CastToBf16WithoutRounding},
        {"unaligned_operand", UnalignedOperand},
        {"outside_its_buffer", OutsideItsBuffer},
        {"queue_depth", QueueDepth},
        {"use_after_free", UseAfterFree},
        {"deque_empty", DequeEmpty},
        {"too_many_queue_buffers", TooManyQueueBuffers},
        {"select_without_scratch", SelectWithoutScratch},
        {"global_out_of_bounds", GlobalOutOfBounds},
        {"ub_overflow", UbOverflow},
    };
    if (argc != 2 || kernels.count(argv[1]) == 0) {
        std::fprintf(stderr, "usage: %s KERNEL\n", argv[0]);
        return 2;
    }
    lossgrad_emu::state().kernel = argv[1];
    kernels.at(argv[1])();
    return 0;
}
