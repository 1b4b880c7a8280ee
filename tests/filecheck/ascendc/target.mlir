// RUN: lossgrad-opt %s -t ascendc | filecheck %s
// RUN: lossgrad-opt %s -p convert-linalg-to-ascendc,ascendc-plan-buffers -t ascendc | filecheck %s
// RUN: lossgrad-opt %s -t 'ascendc{soc=ascend950}' | filecheck %s --check-prefix=A950

// KlDivTargetBackward, f16, target broadcast on axis 0, reduction sum (level-2 IR).
func.func @kltarget(%g: tensor<?x?xf16>, %x: tensor<?x?xf16>, %t: tensor<1x?xf16>) -> tensor<1x?xf16> {
  %c1 = arith.constant 1 : index
  %dim = tensor.dim %t, %c1 : tensor<1x?xf16>
  %init = tensor.empty(%dim) : tensor<1x?xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?xf32>) -> tensor<1x?xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (0, d1)>], iterator_types = ["reduction", "parallel"]} ins(%g, %x, %t : tensor<?x?xf16>, tensor<?x?xf16>, tensor<1x?xf16>) outs(%zeros : tensor<1x?xf32>) {
  ^bb0(%0: f16, %1: f16, %2: f16, %3: f32):
    %4 = arith.extf %0 : f16 to f32
    %5 = arith.extf %1 : f16 to f32
    %6 = arith.extf %2 : f16 to f32
    %7 = arith.constant 1.000000e+00 : f32
    %8 = math.log %6 : f32
    %9 = arith.addf %8, %7 : f32
    %10 = arith.subf %9, %5 : f32
    %11 = arith.mulf %4, %10 : f32
    %12 = arith.constant 0.000000e+00 : f32
    %13 = arith.cmpf oeq, %6, %12 : f32
    %14 = arith.select %13, %12, %11 : f32
    %15 = arith.addf %3, %14 : f32
    linalg.yield %15 : f32
  } -> tensor<1x?xf32>
  %init_1 = tensor.empty(%dim) : tensor<1x?xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%sum : tensor<1x?xf32>) outs(%init_1 : tensor<1x?xf16>) {
  ^bb0(%16: f32, %17: f16):
    %18 = arith.truncf %16 : f32 to f16
    linalg.yield %18 : f16
  } -> tensor<1x?xf16>
  func.return %r : tensor<1x?xf16>
}

// CHECK:      // ----- op_kernel/kltarget_kernel_tiling.h
// CHECK:      struct KltargetKernelTilingData {
// CHECK-NEXT:     uint64_t totalLength;
// CHECK:          uint32_t tileLength;
// CHECK-NEXT: };
// CHECK:      // ----- op_kernel/kltarget_kernel.cpp
// CHECK:      // Tile length 5824 on ascend910b; 187104 of 196608 UB bytes in buffers.
// CHECK:      #include "kernel_operator.h"
// CHECK:      __aicore__ inline void CopyGmToUbPadded(
// CHECK:      class KernelKltargetKernel {
// CHECK:          __aicore__ inline void Init(GM_ADDR grad_output, GM_ADDR self, GM_ADDR target, GM_ADDR out, const KltargetKernelTilingData& tiling, TPipe* pipe)
// CHECK:              grad_outputGm.SetGlobalBuffer((__gm__ half*)grad_output + start, length);
// CHECK:              outGm.SetGlobalBuffer((__gm__ float*)out + start, length);
// CHECK:              pipe->InitBuffer(inQueue0, 2, tileLength * sizeof(half));
// CHECK:              pipe->InitBuffer(outQueue0, 2, tileLength * sizeof(float));
// CHECK:              pipe->InitBuffer(calcBuf3, (tileLength + 7) / 8);
// CHECK:          __aicore__ inline void Process()
// CHECK:                  CopyIn(offset, count);
// CHECK-NEXT:             Compute(offset, count);
// CHECK-NEXT:             CopyOut(offset, count);
// CHECK:          __aicore__ inline void CopyIn(uint64_t offset, uint32_t count)
// CHECK-NEXT:     {
// CHECK-NEXT:         LocalTensor<half> [[G:t[0-9]+]] = inQueue0.AllocTensor<half>();
// CHECK-NEXT:         CopyGmToUbPadded([[G]], grad_outputGm[offset], count);
// CHECK-NEXT:         inQueue0.EnQue([[G]]);
// CHECK:          __aicore__ inline void Compute(uint64_t offset, uint32_t count)
// CHECK:              Cast([[O:t[0-9]+]], {{t[0-9]+}}, RoundMode::CAST_NONE, count);
// CHECK:              Ln([[L:t[0-9]+]], [[T:t[0-9]+]], count);
// CHECK-NEXT:         Adds([[L]], [[L]], {{s[0-9]+}}, count);
// CHECK-NEXT:         Sub(
// CHECK-NEXT:         Mul([[O]], [[O]],
// CHECK-NEXT:         const uint32_t [[N:n[0-9]+]] = (count + 63) / 64 * 64;
// CHECK-NEXT:         Compares([[M:t[0-9]+]], [[T]], {{s[0-9]+}}, CMPMODE::NE, [[N]]);
// CHECK-NEXT:         Select([[O]], [[M]], [[O]], {{s[0-9]+}}, SELMODE::VSEL_TENSOR_SCALAR_MODE, [[N]]);
// CHECK-NEXT:         outQueue0.EnQue([[O]]);
// CHECK:          __aicore__ inline void CopyOut(uint64_t offset, uint32_t count)
// CHECK:              CopyUbToGmPadded(outGm[offset], {{t[0-9]+}}, count);
// CHECK:      extern "C" __global__ __aicore__ void kltarget_kernel(GM_ADDR grad_output, GM_ADDR self, GM_ADDR target, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling)
// CHECK:          GET_TILING_DATA_WITH_STRUCT(KltargetKernelTilingData, tilingData, tiling);
// CHECK-NEXT:     TPipe pipe;
// CHECK-NEXT:     KernelKltargetKernel op;
// CHECK-NEXT:     op.Init(grad_output, self, target, out, tilingData, &pipe);
// CHECK-NEXT:     op.Process();

// A950: // Tile length 7616 on ascend950; 244672 of 253952 UB bytes in buffers.
