// RUN: lossgrad-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The vector unit of Atlas A2/A3 has no bf16 arithmetic.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<bf16>, %b: !ascendc.gm<bf16>, %c: !ascendc.gm<bf16>, %o: !ascendc.gm<bf16>):
  %buf = ascendc.tbuf : !ascendc.tbuf<bf16>
  %n = ascendc.tile_length
  %t = ascendc.get %buf : !ascendc.tbuf<bf16> -> !ascendc.local<bf16>
  ascendc.mul %t, %t, %t, %n : !ascendc.local<bf16>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.mul' on bf16: the vector unit of Atlas A2/A3 has no bf16 arithmetic; Cast to f32 first

// -----

// float -> bf16 has no CAST_NONE on A2.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<bf16>):
  %b16 = ascendc.tbuf : !ascendc.tbuf<bf16>
  %b32 = ascendc.tbuf : !ascendc.tbuf<f32>
  %n = ascendc.tile_length
  %t16 = ascendc.get %b16 : !ascendc.tbuf<bf16> -> !ascendc.local<bf16>
  %t32 = ascendc.get %b32 : !ascendc.tbuf<f32> -> !ascendc.local<f32>
  ascendc.cast %t16, %t32 CAST_NONE, %n : !ascendc.local<bf16>, !ascendc.local<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.cast' from f32 to bf16 needs one of CAST_CEIL, CAST_FLOOR, CAST_RINT, CAST_ROUND, CAST_TRUNC, got CAST_NONE

// -----

// A dequeued tile must be freed in the same stage.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.copy_in %l, %a[%off], %cnt : !ascendc.local<f32>, !ascendc.gm<f32>
    ascendc.enque %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
  } compute {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.deque %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.exp %l, %l, %cnt : !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.deque' in stage compute: the tile must be freed exactly once in the same stage

// -----

// A tile is not used after FreeTensor.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.enque %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
  } compute {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.deque %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.free %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
    ascendc.exp %l, %l, %cnt : !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.deque' in stage compute: the tile is used after it is freed

// -----

// VECIN tiles are allocated by CopyIn, not by Compute.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
    %l = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.enque %q, %l : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.alloc' is only allowed in the copy_in stage, not compute

// -----

// DataCopy into UB belongs to CopyIn.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %buf = ascendc.tbuf : !ascendc.tbuf<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
    %t = ascendc.get %buf : !ascendc.tbuf<f32> -> !ascendc.local<f32>
    ascendc.copy_in %t, %a[%off], %cnt : !ascendc.local<f32>, !ascendc.gm<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.copy_in' is only allowed in the copy_in stage, not compute

// -----

// InitBuffer takes 1 to 64 buffers.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECIN depth 1 buffers 65 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.queue' buffers must be in [1, 64] (InitBuffer num)

// -----

// The tile length honours the 256-byte alignment of Compare.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64, tile_length = 100 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: 'ascendc.kernel' tile_length 100 is not a multiple of tile_align

// -----

// A kernel ends in its tile loop.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECIN depth 1 buffers 2 : !ascendc.queue<f32>
}
// CHECK: 'ascendc.kernel' must end in an ascendc.tile_loop

// -----

// Global tensors hold f16, bf16 or f32 (no fp64 on the vector units).
"test.op"() {t = !ascendc.gm<f64>} : () -> ()
// CHECK: ascendc.gm element type must be one of f16, bf16, f32, got f64

// -----

// A ReduceSum result names a source dim or keeps a size-1 dim.
%y = "test.op"() : () -> tensor<4x5xf32>
%r = ascendc.reduce_sum %y map affine_map<(d0, d1) -> (0, d1)> : tensor<4x5xf32> -> tensor<4x5xf32>
// CHECK: 'ascendc.reduce_sum' map results must be dims, or 0 for a size-1 dim

// -----

// BroadcastTo never lowers the rank.
%t = "test.op"() : () -> tensor<2x3xf32>
%b = ascendc.broadcast_to %t : tensor<2x3xf32> -> tensor<3xf32>
// CHECK: 'ascendc.broadcast_to' cannot lower the rank

// -----

// Compare writes a bit mask.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<f32>, %o: !ascendc.gm<f32>):
  %buf = ascendc.tbuf : !ascendc.tbuf<f32>
  %n = ascendc.tile_length
  %t = ascendc.get %buf : !ascendc.tbuf<f32> -> !ascendc.local<f32>
  %s = arith.constant 0.0 : f32
  "ascendc.compares"(%t, %t, %s, %n) <{mode = #ascendc<cmp_mode NE>}> : (!ascendc.local<f32>, !ascendc.local<f32>, f32, index) -> ()
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
  } copy_out {
  ^bb0(%off: index, %cnt: index):
  }
}
// CHECK: !ascendc.local<i1>

// -----

// An element loop reads through maps over its own loops only.
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<i64>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
    %t = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.element_loop %t, %cnt rank 2 {
    ^bb0(%k: index):
      %v = ascendc.read_element %a map affine_map<(d0) -> (d0)> : !ascendc.gm<f32> -> f32
      ascendc.store_element %v : f32
    } : !ascendc.local<f32>
    ascendc.enque %q, %t : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
    %r = ascendc.deque %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.free %q, %r : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}
// CHECK: 'ascendc.read_element' map reads loops of the element_loop (or a constant 0)

// -----

// An element loop stores the tile's element type (a class index is not stored).
ascendc.kernel @k attributes {arg_names = ["a", "b", "c", "o"], num_inputs = 3 : i64} {
^bb0(%a: !ascendc.gm<f32>, %b: !ascendc.gm<f32>, %c: !ascendc.gm<i64>, %o: !ascendc.gm<f32>):
  %q = ascendc.queue VECOUT depth 1 buffers 2 : !ascendc.queue<f32>
  ascendc.tile_loop copy_in {
  ^bb0(%off: index, %cnt: index):
  } compute {
  ^bb0(%off: index, %cnt: index):
    %t = ascendc.alloc %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.element_loop %t, %cnt rank 1 {
    ^bb0(%k: index):
      %v = ascendc.read_element %c map affine_map<(d0) -> (d0)> : !ascendc.gm<i64> -> i64
      ascendc.store_element %v : i64
    } : !ascendc.local<f32>
    ascendc.enque %q, %t : !ascendc.queue<f32>, !ascendc.local<f32>
  } copy_out {
  ^bb0(%off: index, %cnt: index):
    %r = ascendc.deque %q : !ascendc.queue<f32> -> !ascendc.local<f32>
    ascendc.free %q, %r : !ascendc.queue<f32>, !ascendc.local<f32>
  }
}
// CHECK: 'ascendc.store_element' stores the tile's element type

// -----

// A local tile holds floats or a mask, never a class index (only GM does).
%x = "test.op"() : () -> !ascendc.local<i64>
// CHECK: ascendc.local element type must be one of f16, bf16, f32, i1, got i64
