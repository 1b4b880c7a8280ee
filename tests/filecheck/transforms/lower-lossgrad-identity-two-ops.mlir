// A function with two lossgrad ops computes no single operator: lower-lossgrad lowers it but
// does not mark it, and the runtime-parameter form, which needs signature functions, refuses it.
// RUN: lossgrad-opt %s -p lower-lossgrad | filecheck %s
// RUN: not lossgrad-opt %s -p 'lower-lossgrad{runtime_parameters=true}' 2>&1 | filecheck %s --check-prefix=ERR

func.func @two(%dy: tensor<f32>, %x: tensor<4xf32>, %t: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = lossgrad.kl_div_backward %dy, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %b = lossgrad.kl_div_target_backward %dy, %x, %t : tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a, %b : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @two(
// CHECK-NOT:     lossgrad.op_type
// CHECK:         linalg.generic
// CHECK:         linalg.generic
// CHECK:         func.return

// ERR: lower-lossgrad{runtime_parameters=true}: @two must hold exactly one lossgrad op
