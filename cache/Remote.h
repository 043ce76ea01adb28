//===- Remote.h - a cache tier on an HTTP server or in an S3 bucket -*- C++ -*-===//
//
// Where no shared file system reaches every host, the cache's artifacts
// live on an HTTP server that takes PUT (nginx with WebDAV) or in an S3
// bucket, behind each host's local directory (docs/cache.md, "Remote
// tiers"). A remote tier holds objects under the local layout's paths
// (`kiln-<major>/objects/<k0k1>/<key>.kneff` below the URL's prefix), so a
// cache directory served by nginx is an HTTP tier as it stands.
//
// Transfers go through libcurl; S3 requests are signed with AWS Signature
// Version 4 (libcurl's), with credentials from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the profile AWS_PROFILE
// (or `default`) of ~/.aws/credentials, else the container credentials
// endpoint (ECS, AWS Batch, EKS Pod Identity; renewed before they expire).
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL points at an S3-compatible server (path-style requests);
// AWS_REGION or AWS_DEFAULT_REGION gives the region (us-east-1).
//
// Objects are immutable and content-addressed, and a PUT is atomic on both
// kinds of server (S3 publishes an object when its upload completes; nginx
// writes the body to a temporary file and renames it into place), so no
// reader ever sees a partial object under a key.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_REMOTE_H
#define KILN_CACHE_REMOTE_H

#include "cache/Tier.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cache {

/// Whether `root` names a remote tier (s3://, http://, https://).
bool isRemoteUrl(llvm::StringRef root);

/// Where a remote tier keeps the artifact for `key` (the local layout's
/// path below the root): kiln-<major>/objects/<k0k1>/<key>.kneff.
std::string remoteObjectPath(llvm::StringRef key);
/// The directory of every artifact: kiln-<major>/objects.
std::string remoteObjectsDir();

/// Seconds a transfer may stall (move under 1 KiB/s) before it fails:
/// KILN_CACHE_REMOTE_TIMEOUT (30; at most 3600).
double remoteTimeoutSeconds();

/// An object a remote tier holds.
struct RemoteObject {
  std::string path; // relative to the prefix
  int64_t size = 0;
  double modified = 0; // seconds since the epoch (upload time)
};

class RemoteTier : public Tier {
public:
  /// Parses `url` and reads the credentials it needs. Errors name the URL.
  static llvm::Expected<std::unique_ptr<RemoteTier>> open(llvm::StringRef url);
  ~RemoteTier() override;

  /// The URL as the user gave it.
  std::string location() const override { return given; }
  llvm::Expected<std::optional<std::string>>
  fetchArtifact(llvm::StringRef key) const override;
  llvm::Error publishArtifact(llvm::StringRef key,
                              llvm::StringRef bytes) const override;
  llvm::Error removeArtifact(llvm::StringRef key) const override;
  llvm::Expected<std::vector<TierEntry>> listArtifacts() const override;
  /// kiln-<major>/records/<k0k1>/<key>.json
  llvm::Error publishRecord(llvm::StringRef key,
                            llvm::StringRef json) const override;
  llvm::Expected<std::optional<std::string>>
  fetchRecord(llvm::StringRef key) const override;
  /// kiln-<major>/coverage.json
  llvm::Error publishManifest(llvm::StringRef json) const override;
  llvm::Expected<std::optional<std::string>> fetchManifest() const override;

  /// The object at `path` (relative to the prefix); nullopt when the server
  /// has none. Errors (unreachable, timeouts, 403, 5xx) name the tier, the
  /// request and the HTTP status.
  llvm::Expected<std::optional<std::string>> get(llvm::StringRef path) const;
  /// Stores `bytes` at `path`, replacing what is there.
  llvm::Error put(llvm::StringRef path, llvm::StringRef bytes) const;
  llvm::Error remove(llvm::StringRef path) const;
  /// Every object below `dir` (relative to the prefix). An S3 tier lists
  /// with ListObjectsV2; an HTTP tier reads nginx's JSON directory listings
  /// (`autoindex on; autoindex_format json;`, docs/cache.md).
  llvm::Expected<std::vector<RemoteObject>> list(llvm::StringRef dir) const;

private:
  RemoteTier() = default;
  struct Response {
    long status = 0;
    std::string body;
  };
  /// `method` on `address`; errors name the tier, the method and `what`.
  llvm::Expected<Response> request(llvm::StringRef method,
                                   const std::string &address,
                                   llvm::StringRef what,
                                   llvm::StringRef body) const;
  llvm::Expected<std::vector<RemoteObject>>
  listBucket(llvm::StringRef dir) const;
  llvm::Error listDirectory(llvm::StringRef dir,
                            std::vector<RemoteObject> &into) const;
  llvm::Error statusError(llvm::StringRef method, llvm::StringRef path,
                          const Response &response) const;

  std::string given;   // s3://bucket/prefix or http(s)://host/prefix
  std::string base;    // the URL objects' paths are appended to
  std::string bucket;  // S3 only
  std::string bucketUrl, keyPrefix; // S3: base is bucketUrl[/keyPrefix]
  std::string sigv4;   // libcurl's CURLOPT_AWS_SIGV4 ("aws:amz:<region>:s3")
  /// Reads the credentials again (those of a container endpoint expire).
  llvm::Error renewCredentials() const;
  // Access key id : secret, a session token and when they expire (0:
  // never); renewed under `lock` as they near expiry.
  mutable std::string userpwd, sessionToken;
  mutable double credentialsExpire = 0;
  double timeout = 30;
  mutable std::mutex lock; // one transfer at a time on the handle
  void *handle = nullptr;
};

} // namespace kiln::cache

#endif // KILN_CACHE_REMOTE_H
