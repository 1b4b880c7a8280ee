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

void SelectPartialOverlap()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf, mask;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    pipe.InitBuffer(mask, 256);
    LocalTensor<float> t = buf.Get<float>();
    LocalTensor<uint8_t> m = mask.Get<uint8_t>();
    Duplicate(t, 1.0f, kTile);
    Compares(m, t, 1.0f, CMPMODE::EQ, 128);
    Select(t[64], m, t, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, 128);  // dst starts inside src0
}

void PartialOverlap()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 1.0f, kTile);
    Add(t[64], t, t, 128);
}

void DuplicateDouble()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(double));
    Duplicate(buf.Get<double>(), 1.0, kTile);
}

void ExpOfInt32()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(int32_t));
    LocalTensor<int32_t> t = buf.Get<int32_t>();
    Duplicate(t, 1, kTile);
    Exp(t, t, kTile);
}

void CompareBf16()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf, mask;
    pipe.InitBuffer(buf, kTile * sizeof(bfloat16_t));
    pipe.InitBuffer(mask, 256);
    LocalTensor<bfloat16_t> t = buf.Get<bfloat16_t>();
    Duplicate(t, ToBfloat16(1.0f), kTile);
    Compares(mask.Get<uint8_t>(), t, ToBfloat16(0.0f), CMPMODE::NE, kTile);
}

void CompareMaskTooSmall()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf, mask;
    pipe.InitBuffer(buf, 2 * kTile * sizeof(float));
    pipe.InitBuffer(mask, 32);  // 256 bits, the compare writes 512
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 1.0f, 2 * kTile);
    Compares(mask.Get<uint8_t>(), t, 0.0f, CMPMODE::NE, 2 * kTile);
}

void SelectWrongMode()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf, mask;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    pipe.InitBuffer(mask, 256);
    LocalTensor<float> t = buf.Get<float>();
    LocalTensor<uint8_t> m = mask.Get<uint8_t>();
    Duplicate(t, 1.0f, kTile);
    Compares(m, t, 1.0f, CMPMODE::EQ, kTile);
    Select(t, m, t, 0.0f, SELMODE::VSEL_TENSOR_TENSOR_MODE, kTile);
}

void NegativeCount()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Adds(t, t, 1.0f, -64);
}

void WideningCastWithRounding()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> a, b;
    pipe.InitBuffer(a, kTile * sizeof(half));
    pipe.InitBuffer(b, kTile * sizeof(float));
    LocalTensor<half> x = a.Get<half>();
    Duplicate(x, half(1.0f), kTile);
    Cast(b.Get<float>(), x, RoundMode::CAST_RINT, kTile);
}

void WideningCastOverlap()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> wide = buf.Get<float>();
    LocalTensor<half> narrow = buf.Get<half>();
    Duplicate(narrow, half(1.0f), kTile);
    Cast(wide, narrow, RoundMode::CAST_NONE, kTile);  // in place: overwrites what it reads
}

void SubTensorPastEnd()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t[kTile + 8], 0.0f, 8);
}

void TBufGetTooLong()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    Duplicate(buf.Get<float>(kTile + 8), 0.0f, 8);
}

void DoubleFree()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.AllocTensor<float>();
    q.FreeTensor(a);
    q.FreeTensor(a);
}

void EnqueFreeBuffer()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.AllocTensor<float>();
    q.FreeTensor(a);
    q.EnQue(a);
}

void ForeignTensor()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> in;
    TQue<QuePosition::VECOUT, 1> out;
    pipe.InitBuffer(in, 2, kTile * sizeof(float));
    pipe.InitBuffer(out, 2, kTile * sizeof(float));
    LocalTensor<float> a = in.AllocTensor<float>();
    out.EnQue(a);
}

void UsedWhileEnqueued()
{
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 2, kTile * sizeof(float));
    LocalTensor<float> a = q.AllocTensor<float>();
    q.EnQue(a);
    Duplicate(a, 0.0f, kTile);
}

void InitBufferCount()
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> q;
    pipe.InitBuffer(q, 0, kTile * sizeof(float));
}

void TooManyBuffers()
{
    TPipe pipe;
    static TBuf<QuePosition::VECCALC> bufs[65];
    for (auto& b : bufs) {
        pipe.InitBuffer(b, 32);
    }
}

void TwoPipes()
{
    TPipe first;
    TPipe second;
}

void CopyOutNotWholeBlocks()
{
    TPipe pipe;
    TQue<QuePosition::VECOUT, 1> q;
    pipe.InitBuffer(q, 1, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(kTile * sizeof(float))), kTile);
    LocalTensor<float> t = q.AllocTensor<float>();
    Duplicate(t, 0.0f, kTile);
    q.EnQue(t);
    t = q.DeQue<float>();
    DataCopy(g, t, 13);
    q.FreeTensor(t);
}

void CopyToUnalignedUb()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(kTile * sizeof(float))), kTile);
    DataCopy(buf.Get<float>()[3], g, 8);
}

void GlobalAddressNotElementAligned()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(400) + 2));
    DataCopy(buf.Get<float>(), g, 64);
}

void PadReservedField()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(40)), 10);
    DataCopyExtParams params{1, 40, 0, 0, 1};
    DataCopyPad(buf.Get<float>(), g, params, DataCopyPadExtParams<float>());
}

void PadLengthNotWholeElements()
{
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kTile * sizeof(float));
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(40)), 10);
    DataCopyExtParams params{1, 6, 0, 0, 0};
    DataCopyPad(buf.Get<float>(), g, params, DataCopyPadExtParams<float>());
}

void ScalarReadPastEnd()
{
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(100 * sizeof(float))), 100);
    (void)g.GetValue(100);
}

void ScalarReadPastAllocation()
{
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(Device(100 * sizeof(float))));
    (void)g.GetValue(100);
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
        {"select_partial_overlap", SelectPartialOverlap},
        {"partial_overlap", PartialOverlap},
        {"duplicate_double", DuplicateDouble},
        {"exp_of_int32", ExpOfInt32},
        {"compare_bf16", CompareBf16},
        {"compare_mask_too_small", CompareMaskTooSmall},
        {"select_wrong_mode", SelectWrongMode},
        {"negative_count", NegativeCount},
        {"widening_cast_with_rounding", WideningCastWithRounding},
        {"widening_cast_overlap", WideningCastOverlap},
        {"sub_tensor_past_end", SubTensorPastEnd},
        {"tbuf_get_too_long", TBufGetTooLong},
        {"double_free", DoubleFree},
        {"enque_free_buffer", EnqueFreeBuffer},
        {"foreign_tensor", ForeignTensor},
        {"used_while_enqueued", UsedWhileEnqueued},
        {"init_buffer_count", InitBufferCount},
        {"too_many_buffers", TooManyBuffers},
        {"two_pipes", TwoPipes},
        {"copy_out_not_whole_blocks", CopyOutNotWholeBlocks},
        {"copy_to_unaligned_ub", CopyToUnalignedUb},
        {"global_address_not_element_aligned", GlobalAddressNotElementAligned},
        {"pad_reserved_field", PadReservedField},
        {"pad_length_not_whole_elements", PadLengthNotWholeElements},
        {"scalar_read_past_end", ScalarReadPastEnd},
        {"scalar_read_past_allocation", ScalarReadPastAllocation},
    };
    if (argc != 2 || kernels.count(argv[1]) == 0) {
        std::fprintf(stderr, "usage: %s KERNEL\n", argv[0]);
        return 2;
    }
    lossgrad_emu::state().kernel = argv[1];
    kernels.at(argv[1])();
    return 0;
}
