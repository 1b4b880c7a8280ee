// CrossEntropyLossGrad's level-2 constructs in the element kernel: the reductions D (kept
// weight) and W (class weight) become Init-time sum loops over the target and the weight,
// computed by every core in level 2's order, their generics gone from the host; the gather
// w[select(valid, t, 0)] an ascendc.gather; exp(log_prob) the vector Exp over log_prob's tile
// (a VECIN queue), read per element with read_tile; the weight tensor is an input, not a
// tiling scalar.
// RUN: lossgrad-opt %s -p lower-lossgrad,convert-linalg-to-ascendc | filecheck %s

func.func @ce(%g: tensor<f32>, %x: tensor<?x?xf32>, %t: tensor<?xi64>, %w: tensor<?xf32>) -> tensor<?x?xf32> {
  %r = lossgrad.cross_entropy_loss_grad %g, %x, %t weight %w ignore_index = 2 label_smoothing = 2.500000e-01 : tensor<f32>, tensor<?x?xf32>, tensor<?xi64>, tensor<?xf32> -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
// CHECK-LABEL: func.func @ce
// CHECK-NOT:     linalg.generic {{.*}} ins(%t : tensor<?xi64>) outs(%zero_kept_weight
// CHECK:         %r = ascendc.launch @ce_kernel(%g, %x, %t, %w) {{.*}} scalars(%ignore_index, %classes_i64, %label_smoothing, %classes_f : i64, i64, f32, f32) maps [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>]
// CHECK:         %bad_targets = linalg.generic {{.*}} ins(%t : tensor<?xi64>)
// CHECK:         func.return %r, %bad_targets
// CHECK:       ascendc.kernel @ce_kernel
// CHECK-SAME:    arg_names = ["grad_output", "self", "target", "weight", "out", "ignore_index", "classes_i64", "label_smoothing", "classes_f"]
// CHECK:         %[[D:.*]] = ascendc.sum_loop %target extent 0 init 0.000000e+00 : f32 {
// CHECK:           %[[T:.*]] = ascendc.gather %target[%{{.*}}] extent 0 : !ascendc.gm<i64> -> i64
// CHECK:           arith.andi
// CHECK-NEXT:      %[[VALID:.*]] = arith.andi
// CHECK:           %[[SAFE:.*]] = arith.select %[[VALID]], %[[T]], %{{.*}} : i64
// CHECK:           %[[K:.*]] = arith.index_cast %[[SAFE]] : i64 to index
// CHECK:           %[[WT:.*]] = ascendc.gather %weight[%[[K]]] extent 1 : !ascendc.gm<f32> -> f32
// CHECK:           %[[TERM:.*]] = arith.select %[[VALID]], %[[WT]], %{{.*}} : f32
// CHECK:           ascendc.sum_term %[[TERM]] : f32
// CHECK:         %[[W:.*]] = ascendc.sum_loop %weight extent 1 init 0.000000e+00 : f32 {
// CHECK:           %[[WJ:.*]] = ascendc.gather %weight[%{{.*}}] extent 1 : !ascendc.gm<f32> -> f32
// CHECK:           ascendc.sum_term %[[WJ]] : f32
// CHECK:         ascendc.queue VECIN
// CHECK:         ascendc.queue VECOUT
// CHECK:         arith.divf %{{.*}}, %[[D]] : f32
// CHECK:         ascendc.tile_loop copy_in {
// CHECK:           ascendc.copy_in %{{.*}}, %self[%offset], %count pad
// CHECK:         } compute {
// CHECK:           %[[LP:.*]] = ascendc.deque
// CHECK:           ascendc.exp %[[E:.*]], %[[LP]], %{{.*}} : !ascendc.local<f32>
// CHECK:           ascendc.element_loop
// CHECK:             ascendc.read_tile %[[E]] : !ascendc.local<f32> -> f32
// CHECK-NOT:         ascendc.read_element %self
// CHECK:             ascendc.gather %weight[%{{.*}}] extent 1
// CHECK:             arith.mulf %{{.*}}, %[[W]] : f32
// CHECK:             ascendc.store_element
