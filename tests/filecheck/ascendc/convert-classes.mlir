// The classification constructs become an element kernel: each output element computed with
// scalar code (its positions, GetValue of every input through its map, the body's ops), no
// BroadcastTo on the host, and the target check left in the function for the aclnn wrapper.
// RUN: lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-ascendc | filecheck %s

func.func @nll2d(%g: tensor<?x?x?xf16>, %x: tensor<?x?x?x?xf16>, %t: tensor<?x?x?xi32>, %tw: tensor<f16>) -> tensor<?x?x?x?xf16> {
  %r = lossgrad.nll_loss2d_backward %g, %x, %t, %tw reduction = none ignore_index = 1 : tensor<?x?x?xf16>, tensor<?x?x?x?xf16>, tensor<?x?x?xi32>, tensor<f16> -> tensor<?x?x?x?xf16>
  func.return %r : tensor<?x?x?x?xf16>
}
// CHECK-LABEL: func.func @nll2d
// CHECK-NOT:     ascendc.broadcast_to
// CHECK:         %r = ascendc.launch @nll2d_kernel(%g, %x, %t, %tw) {{.*}} scalars(%ignore_index, %classes_i64 : i64, i64) maps [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>]
// CHECK:         %bad_targets = linalg.generic {{.*}} ins(%t : tensor<?x?x?xi32>)
// CHECK:         func.return %r, %bad_targets
// CHECK:       ascendc.kernel @nll2d_kernel
// CHECK-SAME:    arg_names = ["grad_output", "self", "target", "total_weight", "out", "ignore_index", "classes_i64"]
// CHECK:         %target: !ascendc.gm<i32>
// CHECK:         ascendc.queue VECOUT
// CHECK-NOT:     ascendc.queue VECIN
// CHECK:         arith.constant 0 : i64
// CHECK:         ascendc.tile_loop
// CHECK:         ascendc.element_loop %{{.*}}, %{{.*}} rank 4 {
// CHECK:           ascendc.read_element %grad_output map affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)> : !ascendc.gm<f16> -> f16
// CHECK:           %[[T:.*]] = ascendc.read_element %target map affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)> : !ascendc.gm<i32> -> i32
// CHECK:           %[[J:.*]] = ascendc.position 1
// CHECK:           %[[JI:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK:           %[[T64:.*]] = arith.extsi %[[T]] : i32 to i64
// CHECK:           arith.cmpi ne, %[[T64]], %ignore_index : i64
// CHECK:           arith.cmpi slt, %[[T64]], %classes_i64 : i64
// CHECK:           arith.cmpi eq, %[[T64]], %[[JI]] : i64
// CHECK:           %[[S:.*]] = arith.select
// CHECK-NEXT:      %[[V:.*]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT:      ascendc.store_element %[[V]] : f16
// CHECK:         ascendc.copy_out %out

// Mean over [N, C] with a weight: the one-element inputs are read once (GetValue in Init)
// and so is what depends on them alone (the quotient); target per row, weight per class.
func.func @nll(%g: tensor<f32>, %x: tensor<?x5xf32>, %t: tensor<?xi64>, %tw: tensor<f32>, %w: tensor<5xf32>) -> tensor<?x5xf32> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw weight %w ignore_index = 3 : tensor<f32>, tensor<?x5xf32>, tensor<?xi64>, tensor<f32>, tensor<5xf32> -> tensor<?x5xf32>
  func.return %r : tensor<?x5xf32>
}
// CHECK-LABEL: ascendc.kernel @nll_kernel
// CHECK:         %[[G:.*]] = ascendc.get_value %grad_output : !ascendc.gm<f32> -> f32
// CHECK:         %[[TW:.*]] = ascendc.get_value %total_weight : !ascendc.gm<f32> -> f32
// CHECK:         %[[Q:.*]] = arith.divf %[[G]], %[[TW]] : f32
// CHECK:         ascendc.tile_loop
// CHECK:         ascendc.element_loop %{{.*}}, %{{.*}} rank 2 {
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: index):
// CHECK-NEXT:      %[[T:.*]] = ascendc.read_element %target map affine_map<(d0, d1) -> (d0)> : !ascendc.gm<i64> -> i64
// CHECK-NEXT:      %[[W:.*]] = ascendc.read_element %weight map affine_map<(d0, d1) -> (d1)> : !ascendc.gm<f32> -> f32
// CHECK-NEXT:      %[[J:.*]] = ascendc.position 1
// CHECK-NOT:       arith.divf
// CHECK:           arith.cmpi eq, %[[T]], %{{.*}} : i64
// CHECK:           arith.mulf %[[W]], %{{.*}} : f32
// CHECK:           ascendc.store_element
