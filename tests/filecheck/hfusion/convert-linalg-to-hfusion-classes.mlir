// convert-linalg-to-hfusion on the classification operators' level 2: the class position is
// a 1-d hfusion.arange broadcast along the rows, the target is broadcast along the class
// axis and the weight along the rows, cmpi/andi are hfusion.compare/elemwise_binary on i1
// (ne a negated veq: cast to i64, == 0), a half-type quotient is rounded by a 0-d cast kept
// through a bitcast pair, and the target check's count is a linalg.reduce of addi into a
// 0-d i64, returned second. The output reads back, in custom and generic form.
// RUN: lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-hfusion,cse | filecheck %s
// RUN: lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-hfusion,cse | lossgrad-opt | filecheck %s
// RUN: lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-hfusion,cse --print-op-generic | lossgrad-opt | filecheck %s

func.func @nll_bf16(%g: tensor<bf16>, %x: tensor<?x5xbf16>, %t: tensor<?xi32>, %tw: tensor<bf16>, %w: tensor<5xbf16>) -> tensor<?x5xbf16> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw weight %w ignore_index = 3 : tensor<bf16>, tensor<?x5xbf16>, tensor<?xi32>, tensor<bf16>, tensor<5xbf16> -> tensor<?x5xbf16>
  func.return %r : tensor<?x5xbf16>
}

// CHECK-LABEL: func.func @nll_bf16
// CHECK-SAME:    -> (tensor<?x5xbf16>, tensor<i64>)
// CHECK-SAME:    hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>
// CHECK-NOT:     linalg.generic
// CHECK:         hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%{{.*}} : tensor<?xi32>) outs(%{{.*}} : tensor<?xi64>)
// CHECK:         linalg.broadcast ins(%{{[0-9]+}}{{ ?: ?}}tensor<?xi64>) outs(%{{[0-9]+}}{{ ?: ?}}tensor<?x5xi64>) dimensions = [1]
// CHECK:         linalg.broadcast ins(%{{[0-9]+}}{{ ?: ?}}tensor<5xf32>) outs(%{{[0-9]+}}{{ ?: ?}}tensor<?x5xf32>) dimensions = [0]
// CHECK:         %[[J:.*]] = hfusion.arange offset[%{{.*}}] strides[%{{.*}}] outs(%{{.*}} : tensor<5xi64>) -> tensor<5xi64>
// CHECK:         linalg.broadcast ins(%[[J]]{{ ?: ?}}tensor<5xi64>) outs(%{{[0-9]+}}{{ ?: ?}}tensor<?x5xi64>) dimensions = [0]
// CHECK:         hfusion.compare {compare_fn = #hfusion.compare_fn<veq>} ins(%{{.*}}, %{{.*}} : tensor<?x5xi64>, i64)
// CHECK:         hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%{{.*}} : tensor<?x5xi1>) outs(%{{.*}} : tensor<?x5xi64>)
// CHECK:         hfusion.compare {compare_fn = #hfusion.compare_fn<vge>}
// CHECK:         hfusion.compare {compare_fn = #hfusion.compare_fn<vlt>}
// CHECK:         hfusion.elemwise_binary {fun = #hfusion.binary_fn<vand>} ins(%{{.*}}, %{{.*}} : tensor<?x5xi1>, tensor<?x5xi1>)
// CHECK:         arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%{{.*}} : tensor<f32>) outs(%{{.*}} : tensor<bf16>)
// CHECK:         hfusion.bitcast ins(%{{.*}} : tensor<bf16>) outs(%{{.*}} : tensor<i16>)
// CHECK-NEXT:    hfusion.bitcast ins(%{{.*}} : tensor<i16>) outs(%{{.*}} : tensor<bf16>)
// CHECK:         hfusion.select ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x5xi1>, tensor<?x5xf32>, f32)
// CHECK:         %[[COUNTED:.*]] = linalg.reduce ins(%{{[0-9]+}}{{ ?: ?}}tensor<?xi64>) outs(%{{[0-9]+}}{{ ?: ?}}tensor<i64>) dimensions = [0]
// CHECK:           arith.addi %{{.*}}, %{{.*}} : i64
// CHECK:         %[[COUNT:.*]] = linalg.elemwise_binary {fun = #linalg.binary_fn<max_signed>} ins(%[[COUNTED]], %[[COUNTED]] : tensor<i64>, tensor<i64>)
// CHECK:         func.return %{{.*}}, %[[COUNT]] : tensor<?x5xbf16>, tensor<i64>
// CHECK-NOT:     compare_fn<vne>
