// Ascend's vector units have no fp64: the pass refuses float64 and names the targets that
// compute it.
// RUN: not lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-hfusion 2>&1 | filecheck %s

func.func @f64(%g: tensor<f64>, %x: tensor<?xf64>, %t: tensor<?xf64>) -> tensor<?xf64> {
  %r = lossgrad.kl_div_backward %g, %x, %t reduction = sum log_target = false : tensor<f64>, tensor<?xf64>, tensor<?xf64> -> tensor<?xf64>
  func.return %r : tensor<?xf64>
}
// CHECK: lossgrad-opt: error: {{.*}}refuses-float64.mlir: f64: element type: float64 is not supported by AscendNPU IR (Ascend vector units have no fp64 arithmetic); use the onnx, ort or iree target [aclnn 161002 ACLNN_ERR_PARAM_INVALID]
