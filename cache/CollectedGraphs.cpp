//===- CollectedGraphs.cpp - the folder graph collection records into -----===//

#include "cache/CollectedGraphs.h"

#include "cache/Cache.h"
#include "cache/Key.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace kiln::cache {

namespace {

constexpr llvm::StringLiteral kGraphSuffix = ".kgraph.pb";
constexpr llvm::StringLiteral kFlagsSuffix = ".flags";
// llvm::sys::fs::createUniqueFile's model: eight random hex digits.
constexpr llvm::StringLiteral kStagingModel = ".tmp-%%%%%%%%";

/// The flags a graph was recorded with: one a line. A graph without its
/// sidecar compiles with the default options.
std::vector<std::string> readFlags(llvm::StringRef path) {
  std::vector<std::string> flags;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    return flags;
  }
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    if (!line.trim().empty()) {
      flags.push_back(line.trim().str());
    }
  }
  return flags;
}

/// Writes `content` at `path` by rename of a staging file, unless a file is
/// there already.
llvm::Error publishOnce(llvm::StringRef dir, llvm::StringRef path,
                        llvm::StringRef content) {
  if (llvm::sys::fs::exists(path)) {
    return llvm::Error::success();
  }
  llvm::SmallString<256> temp;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          path + kStagingModel, fd, temp)) {
    return llvm::createStringError("cannot write into '" + dir +
                                   "': " + ec.message());
  }
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << content;
    out.flush();
    if (out.has_error()) {
      std::string message = out.error().message();
      out.clear_error();
      llvm::sys::fs::remove(temp);
      return llvm::createStringError("cannot write '" + temp + "': " + message);
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return llvm::createStringError("cannot publish '" + path +
                                   "': " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace

std::string defaultCollectedDir(const Store &store) {
  return store.subdir("collected");
}

llvm::Expected<std::string> collectedDirFor(llvm::StringRef graphsDir,
                                            llvm::StringRef cacheRoot) {
  if (!graphsDir.empty()) {
    return graphsDir.str();
  }
  auto store = Store::open(cacheRoot.empty() ? Cache::defaultRoot() : cacheRoot,
                           Store::optionsFromEnvironment());
  if (!store) {
    return store.takeError();
  }
  return defaultCollectedDir(*store);
}

llvm::Error recordGraph(const proto::Graph &graph, const CompileOptions &options,
                        llvm::StringRef key, llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    return llvm::createStringError("cannot create the graphs directory '" +
                                   dir + "': " + ec.message());
  }
  // As traced, names and source locations included (they make precompile's
  // report and errors readable); the key is over the canonical form anyway.
  std::string bytes;
  if (!graph.SerializeToString(&bytes)) {
    return llvm::createStringError("cannot serialize graph '" + graph.name() +
                                   "'");
  }
  std::string flags;
  for (const std::string &flag : options.toFlags()) {
    flags += flag + "\n";
  }
  // The flags first: a graph counts as collected once its .kgraph.pb exists.
  for (auto [suffix, content] : {std::pair{kFlagsSuffix, llvm::StringRef(flags)},
                                 std::pair{kGraphSuffix, llvm::StringRef(bytes)}}) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, key + suffix);
    if (llvm::Error error = publishOnce(dir, path, content)) {
      return error;
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<CollectedGraph>>
listCollectedGraphs(llvm::StringRef dir) {
  std::vector<CollectedGraph> graphs;
  if (!llvm::sys::fs::is_directory(dir)) {
    return graphs;
  }
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.ends_with(kGraphSuffix)) {
      continue;
    }
    CollectedGraph graph;
    graph.path = it->path();
    graph.key = name.drop_back(kGraphSuffix.size()).str();
    graph.flags = readFlags((dir + "/" + graph.key + kFlagsSuffix).str());
    graphs.push_back(std::move(graph));
  }
  if (ec) {
    return llvm::createStringError("cannot list '" + dir + "': " + ec.message());
  }
  std::sort(graphs.begin(), graphs.end(),
            [](const CollectedGraph &a, const CollectedGraph &b) {
              return a.path < b.path;
            });
  return graphs;
}

bool isCollectedFileName(llvm::StringRef name) {
  llvm::StringRef key = name.take_front(64);
  llvm::StringRef rest = name.drop_front(64);
  if (!isKey(key) ||
      !(rest.consume_front(kGraphSuffix) || rest.consume_front(kFlagsSuffix))) {
    return false;
  }
  size_t randomDigits = kStagingModel.count('%');
  return rest.empty() ||
         (rest.consume_front(".tmp-") && rest.size() == randomDigits &&
          llvm::all_of(rest, llvm::isHexDigit));
}

} // namespace kiln::cache
