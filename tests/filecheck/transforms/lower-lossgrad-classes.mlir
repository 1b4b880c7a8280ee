// lower-lossgrad for the classification operators (docs/level2.md, "Beyond elementwise"):
// one all-parallel generic over self's shape with order-preserving maps (target on the row
// loops, weight on the class loop), the class position from linalg.index, then the target
// check counting bad targets into a 0-d i64 that the function returns second.
// RUN: lossgrad-opt %s --split-input-file -p lower-lossgrad | filecheck %s

// CHECK-NOT: lossgrad.nll

func.func @nll_mean_weight(%g: tensor<f32>, %x: tensor<4x5xf32>, %t: tensor<4xi64>, %tw: tensor<f32>, %w: tensor<5xf32>) -> tensor<4x5xf32> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw weight %w ignore_index = 2 : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32>, tensor<5xf32> -> tensor<4x5xf32>
  func.return %r : tensor<4x5xf32>
}
// A static C is a constant; mean divides g by the total_weight operand; w is read at the
// class position; the select keeps the valid target's class only.
// CHECK-LABEL: func.func @nll_mean_weight(
// CHECK-SAME:    -> (tensor<4x5xf32>, tensor<i64>)
// CHECK-SAME:    lossgrad.divisor = "total_weight", lossgrad.checks = ["target_range"]
// CHECK-NEXT:    %[[C:.*]] = arith.constant 5 : i64
// CHECK-NEXT:    %[[II:.*]] = arith.constant 2 : i64
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4x5xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT:    ^bb0(%[[G:.*]]: f32, %{{.*}}: f32, %[[T:.*]]: i64, %[[TW:.*]]: f32, %[[W:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J64:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT:      %[[KEPT:.*]] = arith.cmpi ne, %[[T]], %[[II]] : i64
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT:      %[[GE:.*]] = arith.cmpi sge, %[[T]], %[[ZERO]] : i64
// CHECK-NEXT:      %[[LT:.*]] = arith.cmpi slt, %[[T]], %[[C]] : i64
// CHECK-NEXT:      %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK-NEXT:      %[[VALID:.*]] = arith.andi %[[KEPT]], %[[IN]] : i1
// CHECK-NEXT:      %[[HIT:.*]] = arith.cmpi eq, %[[T]], %[[J64]] : i64
// CHECK-NEXT:      %[[WRITE:.*]] = arith.andi %[[VALID]], %[[HIT]] : i1
// CHECK-NEXT:      %[[Q:.*]] = arith.divf %[[G]], %[[TW]] : f32
// CHECK-NEXT:      %[[NQ:.*]] = arith.negf %[[Q]] : f32
// CHECK-NEXT:      %[[V:.*]] = arith.mulf %[[W]], %[[NQ]] : f32
// CHECK-NEXT:      %[[F0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[OUT:.*]] = arith.select %[[WRITE]], %[[V]], %[[F0]] : f32
// CHECK-NEXT:      linalg.yield %[[OUT]] : f32
// CHECK:         %[[N0:.*]] = arith.constant 0 : i64
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<i64>
// CHECK-NEXT:    %[[FILL:.*]] = linalg.fill ins(%[[N0]] : i64) outs(%[[E]] : tensor<i64>) -> tensor<i64>
// CHECK-NEXT:    %[[BAD:.*]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%{{.*}} : tensor<4xi64>) outs(%[[FILL]] : tensor<i64>)
// CHECK:           %[[NOT:.*]] = arith.xori %{{.*}}, %{{.*}} : i1
// CHECK-NEXT:      %[[B:.*]] = arith.andi %{{.*}}, %[[NOT]] : i1
// CHECK-NEXT:      %[[ONE:.*]] = arith.extui %[[B]] : i1 to i64
// CHECK-NEXT:      %[[SUM:.*]] = arith.addi %{{.*}}, %[[ONE]] : i64
// CHECK-NEXT:      linalg.yield %[[SUM]] : i64
// CHECK:         func.return %[[R]], %[[BAD]] : tensor<4x5xf32>, tensor<i64>

// -----

func.func @nll_none_dynamic(%g: tensor<?xf32>, %x: tensor<?x?xf32>, %t: tensor<?xi64>, %tw: tensor<1xf32>) -> tensor<?x?xf32> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw reduction = none : tensor<?xf32>, tensor<?x?xf32>, tensor<?xi64>, tensor<1xf32> -> tensor<?x?xf32>
  func.return %r : tensor<?x?xf32>
}
// A dynamic C comes from tensor.dim; grad_output is per row (d0); total_weight [1] reads
// (0) and is not used: none negates g, with no division.
// CHECK-LABEL: func.func @nll_none_dynamic(
// CHECK-NOT:     lossgrad.divisor
// CHECK:         %[[C:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x?xf32>
// CHECK-NEXT:    %[[C64:.*]] = arith.index_cast %[[C]] : index to i64
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           arith.cmpi slt, %{{.*}}, %[[C64]] : i64
// CHECK-NOT:       arith.divf
// CHECK:           arith.negf
// CHECK:         linalg.yield

// -----

func.func @nll_no_batch(%g: tensor<f32>, %x: tensor<5xf32>, %t: tensor<i64>, %tw: tensor<f32>) -> tensor<5xf32> {
  %r = lossgrad.nll_loss_backward %g, %x, %t, %tw reduction = sum : tensor<f32>, tensor<5xf32>, tensor<i64>, tensor<f32> -> tensor<5xf32>
  func.return %r : tensor<5xf32>
}
// [C]: the class loop is d0 and the target 0-d; the check has no loop, no fill, no addi.
// CHECK-LABEL: func.func @nll_no_batch(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK:           linalg.index 0 : index
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<i64>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%{{.*}} : tensor<i64>) outs(%[[E]] : tensor<i64>)
// CHECK-NOT:       arith.addi
// CHECK:           arith.extui
// CHECK-NEXT:      linalg.yield

// -----

func.func @nll2d_half(%g: tensor<f16>, %x: tensor<?x?x?x?xf16>, %t: tensor<?x?x?xi32>, %tw: tensor<f16>) -> tensor<?x?x?x?xf16> {
  %r = lossgrad.nll_loss2d_backward %g, %x, %t, %tw : tensor<f16>, tensor<?x?x?x?xf16>, tensor<?x?x?xi32>, tensor<f16> -> tensor<?x?x?x?xf16>
  func.return %r : tensor<?x?x?x?xf16>
}
// [N, C, H, W]: the target reads (d0, d2, d3); an i32 target is sign-extended; in a half
// type the quotient is rounded to it (truncf, extf) before the negation, and the result
// rounded once.
// CHECK-LABEL: func.func @nll2d_half(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK:           %[[T:.*]] = arith.extsi %{{.*}} : i32 to i64
// CHECK:           %[[Q:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:      %[[QH:.*]] = arith.truncf %[[Q]] : f32 to f16
// CHECK-NEXT:      %[[QF:.*]] = arith.extf %[[QH]] : f16 to f32
// CHECK-NEXT:      arith.negf %[[QF]] : f32
// CHECK:           %[[OUT:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT:      linalg.yield %[[OUT]] : f16
// CHECK:         iterator_types = ["reduction", "reduction", "reduction"]} ins(%{{.*}} : tensor<?x?x?xi32>)
// CHECK:           arith.extsi %{{.*}} : i32 to i64
