// lower-lossgrad marks every function that holds one lossgrad op with the operator and its
// attributes (builtin attributes only), and with runtime_parameters=true turns the divisor n
// of the scale and a beta > 0 into trailing function arguments listed in lossgrad.parameters.
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s
// RUN: lossgrad-opt %s --split-input-file -p 'lower-lossgrad{runtime_parameters=true}' | filecheck %s --check-prefix=PARAM

func.func @sl1(%dy: tensor<f32>, %x: tensor<?x4xf16>, %t: tensor<?x4xf16>) -> tensor<?x4xf32> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = mean beta = 5.000000e-01 : tensor<f32>, tensor<?x4xf16>, tensor<?x4xf16> -> tensor<?x4xf32>
  func.return %g : tensor<?x4xf32>
}
// CHECK-LABEL: func.func @sl1(
// CHECK-SAME:    -> tensor<?x4xf32> attributes {lossgrad.op_type = "SmoothL1LossBackward", lossgrad.attributes = {reduction = "mean", beta = 5.000000e-01 : f64}, lossgrad.divisor = "numel(broadcast(self, target))"} {
// CHECK:         %[[BETA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:         arith.divf %{{.*}}, %[[BETA]] : f32

// PARAM-LABEL: func.func @sl1(
// PARAM-SAME:    %[[DY:[^:]*]]: tensor<f32>, %[[X:[^:]*]]: tensor<?x4xf16>, %[[T:[^:]*]]: tensor<?x4xf16>, %[[N:[^:]*]]: index, %[[BETA:[^:]*]]: f64) -> tensor<?x4xf32>
// PARAM-SAME:    lossgrad.parameters = ["n", "beta"]
// PARAM-NEXT:    %[[BC:.*]] = arith.truncf %[[BETA]] : f64 to f32
// PARAM-NEXT:    %[[NI:.*]] = arith.index_cast %[[N]] : index to i64
// PARAM-NEXT:    %[[NF:.*]] = arith.uitofp %[[NI]] : i64 to f32
// PARAM-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// PARAM-NEXT:    %[[S:.*]] = arith.divf %[[ONE]], %[[NF]] : f32
// PARAM:         linalg.generic
// PARAM:           arith.mulf %{{.*}}, %[[S]] : f32
// PARAM:           arith.divf %{{.*}}, %[[BC]] : f32
// PARAM-NEXT:      arith.negf %[[BC]] : f32
// PARAM-NOT:       arith.constant 5.000000e-01

// -----

// beta = 0 takes the sign form: nothing divides by beta, so beta is no parameter; sum
// scales nothing, so there is no n either.
func.func @sl1_sign(%dy: tensor<?xf64>, %x: tensor<?xf64>, %t: tensor<?xf64>) -> tensor<?xf64> {
  %g = lossgrad.smooth_l1_loss_backward %dy, %x, %t reduction = sum beta = 0.000000e+00 : tensor<?xf64>, tensor<?xf64>, tensor<?xf64> -> tensor<?xf64>
  func.return %g : tensor<?xf64>
}
// PARAM-LABEL: func.func @sl1_sign(
// PARAM-SAME:    tensor<?xf64>, %{{[^:]*}}: tensor<?xf64>) -> tensor<?xf64> attributes
// PARAM-SAME:    lossgrad.parameters = []

// -----

// batchmean of a 0-d self scales nothing; a static mean still takes n as an argument.
func.func @kl_static(%dy: tensor<f32>, %x: tensor<2x3xbf16>, %t: tensor<2x3xbf16>) -> tensor<2x3xbf16> {
  %g = lossgrad.kl_div_backward %dy, %x, %t reduction = mean log_target = true : tensor<f32>, tensor<2x3xbf16>, tensor<2x3xbf16> -> tensor<2x3xbf16>
  func.return %g : tensor<2x3xbf16>
}
// CHECK-LABEL: func.func @kl_static(
// CHECK-SAME:    attributes {lossgrad.op_type = "KlDivBackward", lossgrad.attributes = {reduction = "mean", log_target = 1 : i64}, lossgrad.divisor = "numel(broadcast(self, target))"}
// CHECK-NEXT:    arith.constant 0.166666672 : f32

// PARAM-LABEL: func.func @kl_static(
// PARAM-SAME:    %{{[^:]*}}: tensor<2x3xbf16>, %[[N:[^:]*]]: index) -> tensor<2x3xbf16>
// PARAM-SAME:    lossgrad.parameters = ["n"]
// PARAM-NEXT:    arith.index_cast %[[N]] : index to i64
