//===- KGraphInterfaces.td - what the engines compute of an op ------------===//

#ifndef KILN_KGRAPH_INTERFACES_TD
#define KILN_KGRAPH_INTERFACES_TD

include "mlir/IR/OpBase.td"

def KGraph_EngineElementwiseOp : OpInterface<"EngineElementwiseOp"> {
  let cppNamespace = "::kiln::kgraph";
  let description = [{
    An op the engines compute element by element, from the same element of
    each operand (after broadcasting): the ops a fusion group is made of.
    The graph phase fuses what implements it, and the tile phase asks it
    which instruction computes the op: an activation function (ScalarE's
    `activation`) or an ALU op (`tensor_tensor`, `tensor_scalar`). An op
    with neither (a cast, a select, dropout) is lowered by a rule of its
    own. Declaring it on the op is the one place that says what the op is
    to the engines.
  }];
  let methods = [
    InterfaceMethod<[{
        The activation function that computes the op, or empty.
      }], "::llvm::StringRef", "getActivationFunction", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<[{
        The ALU op that computes the op from its two operands, or empty.
      }], "::llvm::StringRef", "getAluOperation", (ins), [{}],
      [{ return {}; }]>,
  ];
}

#endif // KILN_KGRAPH_INTERFACES_TD
