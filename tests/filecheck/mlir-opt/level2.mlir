// Level-2 IR is upstream MLIR: what lower-lossgrad prints parses and verifies in mlir-opt, and
// MLIR's own pipeline bufferizes it and lowers it to loops. (Unsupported without mlir-opt.)
// RUN: lossgrad-opt %s -p lower-lossgrad | %mlir-opt | filecheck %s
// RUN: lossgrad-opt %s -p lower-lossgrad | %mlir-opt --one-shot-bufferize="bufferize-function-boundaries" --convert-linalg-to-loops | filecheck %s --check-prefix=LOOPS

// CHECK-NOT: lossgrad.
// LOOPS-NOT: linalg.generic

func.func @kl(%dy: tensor<f32>, %x: tensor<?x?xf16>, %t: tensor<?x?xf16>) -> tensor<?x?xf16> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = batchmean log_target = true : tensor<f32>, tensor<?x?xf16>, tensor<?x?xf16> -> tensor<?x?xf16>
  func.return %g : tensor<?x?xf16>
}
// CHECK-LABEL: func.func @kl(
// CHECK:         tensor.dim
// CHECK:         arith.uitofp {{.*}} : i64 to f32
// CHECK:         linalg.generic
// CHECK:           math.exp
// CHECK:           arith.truncf {{.*}} : f32 to f16
// LOOPS-LABEL: func.func @kl(
// LOOPS:         scf.for

func.func @klt(%dy: tensor<f64>, %x: tensor<2x?x4xf64>, %t: tensor<?x1xbf16>) -> tensor<?x1xbf16> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = mean : tensor<f64>, tensor<2x?x4xf64>, tensor<?x1xbf16> -> tensor<?x1xbf16>
  func.return %g : tensor<?x1xbf16>
}
// CHECK-LABEL: func.func @klt(
// CHECK:         linalg.fill
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "reduction"]
// CHECK:           arith.select
// CHECK:         linalg.generic
// CHECK:           arith.truncf {{.*}} : f64 to bf16
// LOOPS-LABEL: func.func @klt(
// LOOPS:         scf.for

func.func @sl1(%dy: tensor<4x1xf32>, %x: tensor<?xf32>, %t: tensor<?xf32>) -> tensor<4x?xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = mean beta = 0.000000e+00 : tensor<4x1xf32>, tensor<?xf32>, tensor<?xf32> -> tensor<4x?xf32>
  func.return %g : tensor<4x?xf32>
}
// CHECK-LABEL: func.func @sl1(
// CHECK:         linalg.generic
// CHECK-NOT:       arith.divf
// CHECK:           arith.cmpf ogt
// LOOPS-LABEL: func.func @sl1(
// LOOPS:         scf.for

func.func @sl1_clamp_rank0(%dy: tensor<f32>, %x: tensor<f32>, %t: tensor<f32>) -> tensor<f32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 5.000000e-01 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  func.return %g : tensor<f32>
}
// CHECK-LABEL: func.func @sl1_clamp_rank0(
// CHECK:         linalg.generic
// CHECK:           arith.divf
