// lower-lossgrad with half and mixed element types: inputs narrower than the compute type C
// are widened with arith.extf (block arguments keep their types), the result is narrowed
// once with arith.truncf; a summed half result is accumulated in C and narrowed by a
// second all-parallel generic.
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

// CHECK-NOT: lossgrad.

func.func @sl1_f16(%dy: tensor<f16>, %x: tensor<4xf16>, %t: tensor<4xf16>) -> tensor<4xf16> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum : tensor<f16>, tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
  func.return %g : tensor<4xf16>
}
// CHECK-LABEL: func.func @sl1_f16(
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4xf16>
// CHECK-NEXT:    linalg.generic {{.*}} outs(%[[INIT]] : tensor<4xf16>) {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %[[C:.*]]: f16, %{{.*}}: f16):
// CHECK-NEXT:      %[[A32:.*]] = arith.extf %[[A]] : f16 to f32
// CHECK-NEXT:      %[[B32:.*]] = arith.extf %[[B]] : f16 to f32
// CHECK-NEXT:      %[[C32:.*]] = arith.extf %[[C]] : f16 to f32
// CHECK:           %[[D:.*]] = arith.subf %[[B32]], %[[C32]] : f32
// CHECK:           %[[R:.*]] = arith.mulf %[[A32]], %{{.*}} : f32
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[R]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[H]] : f16
// CHECK-NEXT:    } -> tensor<4xf16>

// -----

func.func @kl_bf16_unread_self(%dy: tensor<bf16>, %x: tensor<4xbf16>, %t: tensor<4xbf16>) -> tensor<4xbf16> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = none : tensor<bf16>, tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
  func.return %g : tensor<4xbf16>
}
// KlDivBackward never reads self: its block argument is not widened.
// CHECK-LABEL: func.func @kl_bf16_unread_self(
// CHECK:         ^bb0(%[[A:.*]]: bf16, %{{.*}}: bf16, %[[C:.*]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT:      %[[A32:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:      %[[C32:.*]] = arith.extf %[[C]] : bf16 to f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A32]], %[[C32]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[M]] : f32
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[N]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[H]] : bf16

// -----

func.func @klt_bf16_summed(%dy: tensor<f32>, %x: tensor<4x3xbf16>, %t: tensor<3xbf16>) -> tensor<3xbf16> {
  %g = lossgrad.kl_div_target_backward %dy, %x, %t reduction = sum log_target = true : tensor<f32>, tensor<4x3xbf16>, tensor<3xbf16> -> tensor<3xbf16>
  func.return %g : tensor<3xbf16>
}
// CHECK-LABEL: func.func @klt_bf16_summed(
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<3xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[INIT]] : tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} {{.*}} outs(%[[ZEROS]] : tensor<3xf32>) {
// CHECK-NEXT:    ^bb0(%{{.*}}: f32, %{{.*}}: bf16, %{{.*}}: bf16, %[[ACC:.*]]: f32):
// CHECK:           %[[ADD:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:      linalg.yield %[[ADD]] : f32
// CHECK-NEXT:    } -> tensor<3xf32>
// CHECK-NEXT:    %[[INIT2:.*]] = tensor.empty() : tensor<3xbf16>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%[[SUM]] : tensor<3xf32>) outs(%[[INIT2]] : tensor<3xbf16>) {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[V]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[H]] : bf16
// CHECK-NEXT:    } -> tensor<3xbf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<3xbf16>

// -----

func.func @kl_f64_grad_f16_self(%dy: tensor<f64>, %x: tensor<4xf16>, %t: tensor<4xf16>) -> tensor<4xf16> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = sum : tensor<f64>, tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
  func.return %g : tensor<4xf16>
}
// Mixed types: C = f64 (promotion), the result keeps self's f16: one truncf f64 -> f16.
// CHECK-LABEL: func.func @kl_f64_grad_f16_self(
// CHECK:         ^bb0(%[[A:.*]]: f64, %{{.*}}: f16, %[[C:.*]]: f16, %{{.*}}: f16):
// CHECK-NEXT:      %[[C64:.*]] = arith.extf %[[C]] : f16 to f64
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[C64]] : f64
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[M]] : f64
// CHECK-NEXT:      %[[H:.*]] = arith.truncf %[[N]] : f64 to f16
// CHECK-NEXT:      linalg.yield %[[H]] : f16

// -----

func.func @sl1_f16_bf16(%dy: tensor<f16>, %x: tensor<4xbf16>, %t: tensor<4xf16>) -> tensor<4xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = mean : tensor<f16>, tensor<4xbf16>, tensor<4xf16> -> tensor<4xf32>
  func.return %g : tensor<4xf32>
}
// f16 with bf16 promotes to f32: the result is f32, nothing to narrow.
// CHECK-LABEL: func.func @sl1_f16_bf16(
// CHECK:         ^bb0(%{{.*}}: f16, %{{.*}}: bf16, %{{.*}}: f16, %{{.*}}: f32):
// CHECK-NOT:       arith.truncf
// CHECK:           linalg.yield %{{.*}} : f32
