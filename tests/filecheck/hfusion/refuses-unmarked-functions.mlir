// A function that does not say which operator it computes is outside level 2.
// RUN: not lossgrad-opt %s -p convert-linalg-to-hfusion 2>&1 | filecheck %s

func.func @anonymous(%g: tensor<f32>, %x: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
// CHECK: lossgrad-opt: error: {{.*}}level 2 @anonymous: 'func.func': a lowered signature function carries 'lossgrad.op_type' and 'lossgrad.attributes'
