// The HFusion form's ops and attributes read and print as AscendNPU IR writes them, in
// custom and generic form.
// RUN: lossgrad-opt %s | filecheck %s
// RUN: lossgrad-opt %s --print-op-generic | lossgrad-opt | filecheck %s
// RUN: lossgrad-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

func.func @named(%x: tensor<?x8xf16>, %t: tensor<8xf32>, %s: f32) -> tensor<?x8xf16> attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>} {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf16>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %eb = tensor.empty(%n) : tensor<?x8xi1>
  %eh = tensor.empty(%n) : tensor<?x8xf16>
  %xf = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<?x8xf16>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %tb = linalg.broadcast ins(%t : tensor<8xf32>) outs(%e : tensor<?x8xf32>) dimensions = [0]
  %d = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%xf, %tb : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %q = linalg.elemwise_binary {fun = #linalg.binary_fn<div>} ins(%s, %d : f32, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %l = linalg.elemwise_unary {fun = #linalg.unary_fn<log>} ins(%q : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %c = hfusion.compare {compare_fn = #hfusion.compare_fn<vne>} ins(%l, %s : tensor<?x8xf32>, f32) outs(%eb : tensor<?x8xi1>) -> tensor<?x8xi1>
  %v = hfusion.select ins(%c, %s, %l : tensor<?x8xi1>, f32, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%v : tensor<?x8xf32>) outs(%eh : tensor<?x8xf16>) -> tensor<?x8xf16>
  func.return %r : tensor<?x8xf16>
}
// CHECK-LABEL: func.func @named(%x: tensor<?x8xf16>, %t: tensor<8xf32>, %s: f32) -> tensor<?x8xf16> attributes {hacc.entry, hacc.function_kind = #hacc.function_kind<HOST>} {
// CHECK:         %xf = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%x : tensor<?x8xf16>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK:         %d = linalg.elemwise_binary {fun = #linalg.binary_fn<sub>} ins(%xf, %tb : tensor<?x8xf32>, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %q = linalg.elemwise_binary {fun = #linalg.binary_fn<div>} ins(%s, %d : f32, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %l = linalg.elemwise_unary {fun = #linalg.unary_fn<log>} ins(%q : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %c = hfusion.compare {compare_fn = #hfusion.compare_fn<vne>} ins(%l, %s : tensor<?x8xf32>, f32) outs(%eb : tensor<?x8xi1>) -> tensor<?x8xi1>
// CHECK-NEXT:    %v = hfusion.select ins(%c, %s, %l : tensor<?x8xi1>, f32, tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT:    %r = hfusion.cast {round_mode = #hfusion.round_mode<rint>} ins(%v : tensor<?x8xf32>) outs(%eh : tensor<?x8xf16>) -> tensor<?x8xf16>

// The hidden regions are the scalar bodies of AscendNPU IR's region builders: vne is the
// unordered une, a widening cast is extf and a narrowing one truncf.
// GENERIC:      "hfusion.cast"(%x, %e) <{round_mode = #hfusion.round_mode<rint>, operandSegmentSizes = array<i32: 1, 1>}> ({
// GENERIC-NEXT: ^{{.*}}(%{{.*}}: f16, %{{.*}}: f32):
// GENERIC-NEXT:   %[[W:.*]] = "arith.extf"
// GENERIC:      "linalg.elemwise_binary"(%s, %d, %e) <{fun = #linalg.binary_fn<div>, operandSegmentSizes = array<i32: 2, 1>}> ({
// GENERIC-NEXT: ^{{.*}}(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// GENERIC-NEXT:   %{{.*}} = "arith.divf"
// GENERIC:      "linalg.elemwise_unary"(%q, %e) <{fun = #linalg.unary_fn<log>, operandSegmentSizes = array<i32: 1, 1>}> ({
// GENERIC:        "math.log"
// GENERIC:      "hfusion.compare"(%l, %s, %eb) <{compare_fn = #hfusion.compare_fn<vne>, operandSegmentSizes = array<i32: 2, 1>}> ({
// GENERIC:        "arith.cmpf"(%{{.*}}, %{{.*}}) <{predicate = 13 : i64,
// GENERIC:      "hfusion.select"(%c, %s, %l, %e) <{operandSegmentSizes = array<i32: 3, 1>}> ({
// GENERIC:        "arith.select"
// GENERIC:      "hfusion.cast"(%v, %eh)
// GENERIC:        "arith.truncf"
