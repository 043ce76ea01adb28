//===- KTileBase.td - the ktile dialect ------------------------------------===//
//
// ktile is the tile level: every kgraph tensor has become an HBM buffer, and
// every computation works on tiles in SBUF or PSUM with an explicit
// partition x free layout. Ops say *what* an engine computes on which tile,
// not which engine does it or when: engine assignment, DMA queues,
// scheduling and semaphores belong to the engine phase.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KTILE_BASE_TD
#define KILN_KTILE_BASE_TD

include "mlir/IR/OpBase.td"

def KTile_Dialect : Dialect {
  let name = "ktile";
  let cppNamespace = "::kiln::ktile";
  let summary = "Tiles in SBUF and PSUM, engine-agnostic compute, HBM loads and stores";
  let description = [{
    Buffers are `memref`s whose memory space names the memory: `"hbm"`,
    `"sbuf"` or `"psum"`. An on-chip buffer `memref<P x F... x T, "sbuf">`
    spans partitions `[0, P)` and holds the row-major free dimensions in each
    partition; an HBM buffer is a row-major tensor.

    Compute ops take their buffers as operands (the destination first) and
    name the part of each buffer they touch with a `#kisa.ap` access pattern
    whose partitions and byte offset are *relative to the buffer*. Binding
    buffers to addresses turns such an op into a kisa instruction by adding
    each buffer's base; the op's other attributes (ALU op, activation
    function, immediates) are the instruction's fields, named as kisa names
    them. Ops are in program order; dependencies are what the buffers and
    access patterns say, so the engine phase may reorder anything that does
    not touch the same bytes.

    The tile phase records on each function `ktile.target` (the target's
    name), and the memory plan `ktile.hbm_bytes`, `ktile.argument_addresses`
    (one HBM byte address per argument) and `ktile.spills` (SBUF buffers it
    stored to HBM); `ktile.background` marks an SBUF `ktile.alloc` the plan
    keeps apart from the rest. The dialect verifies each.
  }];
  let dependentDialects = ["::kiln::kisa::KisaDialect"];
  let hasOperationAttrVerify = 1;
}

#endif // KILN_KTILE_BASE_TD
