//===- kiln-isa-tblgen.cpp - the instruction set's C++ tables -------------===//
//
// A TableGen backend over compiler/target/InstructionSet.td. It writes the
// isa::Opcode enumeration (--gen-opcode-enum) and the rows of the schema
// table that isa::schemaOf reads (--gen-schema-table), so the encoding, the
// validator and the disassembly come from the same declarations as the kisa
// and ktile ops, which mlir-tblgen builds from that file.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Main.h"
#include "llvm/TableGen/Record.h"
#include "llvm/TableGen/TableGenBackend.h"

#include <array>
#include <optional>

using namespace llvm;

namespace {

enum class Action { OpcodeEnum, SchemaTable };

cl::opt<Action>
    action(cl::desc("What to generate:"),
           cl::values(clEnumValN(Action::OpcodeEnum, "gen-opcode-enum",
                                 "the isa::Opcode enumeration and kOpcodes"),
                      clEnumValN(Action::SchemaTable, "gen-schema-table",
                                 "the rows of isa's OpcodeSchema table")),
           cl::Required);

/// The defset that lists the instructions in opcode order.
constexpr StringLiteral kInstructionSet = "IsaInstructions";
/// isa::Opcode is a uint8_t.
constexpr size_t kMaxOpcodes = 256;

/// One instruction's arguments placed in the isa::Instruction's slots, the
/// way isa::OpcodeSchema names them.
struct Schema {
  StringRef cppName, mnemonic;
  std::vector<StringRef> engines; // isa::Engine enumerators
  std::array<StringRef, 3> operands;
  unsigned requiredOperands = 0;
  std::array<StringRef, 2> ops, opKinds = {"None", "None"};
  std::array<StringRef, 2> imms;
  std::array<StringRef, 3> ints;
  StringRef flag;
};

/// Puts `name` in the next slot of `slots`; false when all are taken.
template <size_t N>
bool place(std::array<StringRef, N> &slots, unsigned &used, StringRef name) {
  if (used >= N) {
    return false;
  }
  slots[used++] = name;
  return true;
}

std::optional<Schema> schemaOf(const Record *def) {
  Schema s;
  s.cppName = def->getValueAsString("CppName");
  s.mnemonic = def->getValueAsString("Mnemonic");
  for (const Record *engine : def->getValueAsListOfDefs("Engines")) {
    s.engines.push_back(engine->getValueAsString("CppName"));
  }
  std::array<StringRef, 1> flags;
  unsigned operands = 0, ops = 0, imms = 0, ints = 0, flagsUsed = 0;
  bool optionalOperand = false;
  StringSet<> names;
  for (const Record *arg : def->getValueAsListOfDefs("Arguments")) {
    StringRef name = arg->getValueAsString("Name");
    const Record *kind = arg->getValueAsDef("Kind");
    StringRef group = kind->getValueAsString("SlotGroup");
    if (!names.insert(name).second) {
      PrintError(def,
                 "'" + s.mnemonic + "' has two arguments named '" + name + "'");
      return std::nullopt;
    }
    bool placed;
    if (group == "operand") {
      bool optional = arg->getValueAsBit("Optional");
      if (!optional && optionalOperand) {
        PrintError(def, "'" + s.mnemonic + "': operand '" + name +
                            "' is required but follows an optional one");
        return std::nullopt;
      }
      optionalOperand |= optional;
      s.requiredOperands += !optional;
      placed = place(s.operands, operands, name);
    } else if (group == "op") {
      if (ops < s.opKinds.size()) {
        s.opKinds[ops] = kind->getValueAsString("FieldKind");
      }
      placed = place(s.ops, ops, name);
    } else if (group == "imm") {
      placed = place(s.imms, imms, name);
    } else if (group == "int") {
      placed = place(s.ints, ints, name);
    } else if (group == "flag") {
      placed = place(flags, flagsUsed, name);
    } else {
      PrintError(arg, "unknown slot group '" + group + "'");
      return std::nullopt;
    }
    if (!placed) {
      PrintError(def, "'" + s.mnemonic + "' has more '" + group +
                          "' arguments than the encoding has slots");
      return std::nullopt;
    }
  }
  s.flag = flags[0];
  if (operands == 0 || s.engines.empty()) {
    PrintError(def, "'" + s.mnemonic + "' needs an operand and an engine");
    return std::nullopt;
  }
  return s;
}

/// The instructions of the defset, in opcode order.
std::optional<std::vector<Schema>> instructions(const RecordKeeper &records) {
  const auto *list =
      dyn_cast_or_null<ListInit>(records.getGlobal(kInstructionSet));
  if (!list) {
    PrintError("no defset '" + kInstructionSet + "' lists the instructions");
    return std::nullopt;
  }
  if (list->size() > kMaxOpcodes) {
    PrintError("'" + kInstructionSet + "' has more than 256 instructions");
    return std::nullopt;
  }
  std::vector<Schema> all;
  StringSet<> mnemonics, cppNames;
  for (unsigned i = 0; i < list->size(); ++i) {
    const Record *def = list->getElementAsRecord(i);
    std::optional<Schema> s = schemaOf(def);
    if (!s) {
      return std::nullopt;
    }
    if (!mnemonics.insert(s->mnemonic).second ||
        !cppNames.insert(s->cppName).second) {
      PrintError(def, "a second instruction named '" + s->mnemonic + "'");
      return std::nullopt;
    }
    all.push_back(*s);
  }
  return all;
}

std::string quoted(StringRef text) { return ("\"" + text + "\"").str(); }

void emitOpcodeEnum(ArrayRef<Schema> all, raw_ostream &os) {
  os << "enum class Opcode : uint8_t {\n";
  for (const Schema &s : all) {
    os << "  " << s.cppName << ",\n";
  }
  os << "};\n";
  os << "inline constexpr int kOpcodes = " << all.size() << ";\n";
}

/// Rows of `const OpcodeSchema kSchemas[kOpcodes]`, for a file that defines
/// `bit(Engine)` as the engine's bit in OpcodeSchema::engines.
void emitSchemaTable(ArrayRef<Schema> all, raw_ostream &os) {
  auto names = [&](ArrayRef<StringRef> slots) {
    ListSeparator comma;
    for (StringRef name : slots) {
      os << comma << quoted(name);
    }
  };
  for (const Schema &s : all) {
    os << "{Opcode::" << s.cppName << ", " << quoted(s.mnemonic) << ", ";
    ListSeparator bar(" | ");
    for (StringRef engine : s.engines) {
      os << bar << "bit(Engine::" << engine << ")";
    }
    os << ",\n {";
    names(s.operands);
    os << "}, " << s.requiredOperands << ",\n ";
    names(s.ops);
    os << ", FieldKind::" << s.opKinds[0] << ", FieldKind::" << s.opKinds[1]
       << ",\n ";
    names(s.imms);
    os << ", ";
    names(s.ints);
    os << ", " << quoted(s.flag) << "},\n";
  }
}

bool emit(raw_ostream &os, const RecordKeeper &records) {
  std::optional<std::vector<Schema>> all = instructions(records);
  if (!all) {
    return true;
  }
  switch (action) {
  case Action::OpcodeEnum:
    emitSourceFileHeader("The instruction set's opcodes, in encoding order", os,
                         records);
    emitOpcodeEnum(*all, os);
    break;
  case Action::SchemaTable:
    emitSourceFileHeader("The encoding schema of each opcode, in opcode order",
                         os, records);
    emitSchemaTable(*all, os);
    break;
  }
  return false;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv);
  return TableGenMain(argv[0], &emit);
}
