//===- Index.h - the rebuildable SQLite index and event logs ----*- C++ -*-===//
//
// The index (keys, graph names, sizes, compile times, creation and last-use
// times, hit counts, status, and the stats counters) serves `kiln cache ls`,
// `stats` and `gc`. Nothing at train time needs it, and it can be deleted and
// rebuilt from the files.
//
// Processes that use the cache never write the index: each appends its
// events (hits, misses, compiles, ...) to events/<host>.log, one short line
// per event, so that no two hosts ever append to one file (appends are not
// atomic across NFS clients, and SQLite's locking is not trustworthy there).
// The maintenance commands merge the logs into the index under the index
// lease, which serializes every writer of the index.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_INDEX_H
#define KILN_CACHE_INDEX_H

#include "cache/Lease.h"
#include "cache/Store.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

/// The stats counters (docs/cache.md explains each).
inline constexpr const char *kCounterNames[] = {
    "hits",          "misses",     "compiles",      "bypasses",
    "failures",      "corrupt",    "lease_waits",   "lease_wait_seconds",
    "seconds_saved", "bytes_read", "bytes_written", "compile_seconds"};

/// One event a cache user records. `size` and `seconds` depend on the kind.
struct Event {
  /// hit remote_hit miss compile bypass failure corrupt lease_wait
  std::string kind;
  std::string key;
  double size = 0;
  double seconds = 0;
  std::string name; // graph name (compile)
  std::string compiler;
  double time = 0;
};

/// Appends an event to this host's log. Best effort: statistics never fail
/// a lookup or a compile.
void appendEvent(const Store &store, const Event &event);

struct IndexEntry {
  std::string key, graphName, status, compiler;
  int64_t size = 0;
  double compileSeconds = 0, created = 0, lastUsed = 0;
  int64_t hits = 0;
};

class Index {
public:
  ~Index();
  Index(Index &&other) noexcept;
  Index &operator=(Index &&) = delete;

  /// Opens the index for maintenance: takes the index lease, merges the
  /// event logs, and keeps the lease until destroyed. Errors name the index
  /// file; a corrupt index is rebuilt from the files.
  static llvm::Expected<Index> openForUpdate(const Store &store);
  /// Opens the index read-only (for listings by users without write access);
  /// it may lag the event logs.
  static llvm::Expected<Index> openReadOnly(const Store &store);

  /// Deletes and recreates the index by scanning objects/ and failed/.
  /// Counters survive when the old index is readable.
  llvm::Error rebuild();

  std::vector<IndexEntry> entries();
  std::optional<IndexEntry> entry(llvm::StringRef key);
  std::map<std::string, double> counters();
  llvm::Error zeroCounters();
  llvm::Error remove(llvm::StringRef key);
  /// Adds or refreshes the entry for an object found on disk.
  llvm::Error upsertObject(const IndexEntry &entry);

private:
  Index(const Store &store) : store(&store) {}
  llvm::Error openDatabase(bool readOnly);
  llvm::Error mergeEvents();
  llvm::Error exec(llvm::StringRef sql);

  const Store *store;
  void *db = nullptr; // sqlite3*
  std::unique_ptr<Lease> lease;
};

} // namespace kiln::cache

#endif // KILN_CACHE_INDEX_H
