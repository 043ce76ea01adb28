//===- Remote.cpp - a cache tier on an HTTP server or in an S3 bucket ----===//

#include "cache/Remote.h"

#include "compiler/support/Sha256.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <curl/curl.h>

#include <cstdlib>

namespace kiln::cache {

namespace {

std::string environment(const char *name, llvm::StringRef otherwise = "") {
  const char *value = std::getenv(name);
  return value && *value ? value : otherwise.str();
}

size_t appendBody(char *data, size_t size, size_t count, void *out) {
  static_cast<std::string *>(out)->append(data, size * count);
  return size * count;
}

/// The AWS credentials of `profile` in the shared credentials file.
struct Credentials {
  std::string id, secret, token;
};

Credentials credentialsFromFile(llvm::StringRef profile) {
  std::string home = environment("HOME", ".");
  std::string path =
      environment("AWS_SHARED_CREDENTIALS_FILE", home + "/.aws/credentials");
  Credentials found;
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    return found;
  }
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  bool inProfile = false;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.consume_front("[") && line.consume_back("]")) {
      inProfile = line.trim() == profile;
      continue;
    }
    auto [name, value] = line.split('=');
    name = name.trim();
    value = value.trim();
    if (!inProfile || value.empty()) {
      continue;
    }
    if (name == "aws_access_key_id") {
      found.id = value.str();
    } else if (name == "aws_secret_access_key") {
      found.secret = value.str();
    } else if (name == "aws_session_token") {
      found.token = value.str();
    }
  }
  return found;
}

/// What S3 (or a compatible server) said in an error body: its <Code>.
std::string s3ErrorCode(llvm::StringRef body) {
  size_t start = body.find("<Code>");
  size_t end = body.find("</Code>");
  if (start == llvm::StringRef::npos || end == llvm::StringRef::npos ||
      end < start) {
    return "";
  }
  return body.slice(start + 6, end).str();
}

} // namespace

bool isRemoteUrl(llvm::StringRef root) {
  return root.starts_with("s3://") || root.starts_with("http://") ||
         root.starts_with("https://");
}

double remoteTimeoutSeconds() {
  double seconds = 30;
  std::string text = environment("KILN_CACHE_REMOTE_TIMEOUT");
  if (!text.empty() && !llvm::StringRef(text).getAsDouble(seconds) &&
      seconds > 0) {
    return seconds;
  }
  return 30;
}

llvm::Expected<std::unique_ptr<RemoteTier>>
RemoteTier::open(llvm::StringRef url) {
  static bool initialised = [] {
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  }();
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("remote cache '" + url + "': " + why);
  };
  if (!initialised) {
    return fail("libcurl could not be initialised");
  }
  std::unique_ptr<RemoteTier> tier(new RemoteTier());
  tier->given = url.str();
  tier->timeout = remoteTimeoutSeconds();
  llvm::StringRef rest = url;
  if (rest.consume_front("s3://")) {
    auto [bucket, prefix] = rest.split('/');
    if (bucket.empty()) {
      return fail("no bucket (s3://<bucket>/<prefix>)");
    }
    tier->bucket = bucket.str();
    std::string region = environment(
        "AWS_REGION", environment("AWS_DEFAULT_REGION", "us-east-1"));
    std::string endpoint = environment(
        "AWS_ENDPOINT_URL_S3", environment("AWS_ENDPOINT_URL"));
    llvm::StringRef trimmed = llvm::StringRef(endpoint).rtrim('/');
    tier->base = endpoint.empty()
                     ? "https://" + bucket.str() + ".s3." + region +
                           ".amazonaws.com"
                     : trimmed.str() + "/" + bucket.str();
    if (!prefix.rtrim('/').empty()) {
      tier->base += "/" + prefix.rtrim('/').str();
    }
    tier->sigv4 = "aws:amz:" + region + ":s3";
    Credentials c{environment("AWS_ACCESS_KEY_ID"),
                  environment("AWS_SECRET_ACCESS_KEY"),
                  environment("AWS_SESSION_TOKEN")};
    if (c.id.empty() || c.secret.empty()) {
      c = credentialsFromFile(environment("AWS_PROFILE", "default"));
    }
    if (c.id.empty() || c.secret.empty()) {
      return fail("no AWS credentials (AWS_ACCESS_KEY_ID and "
                  "AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)");
    }
    tier->userpwd = c.id + ":" + c.secret;
    tier->sessionToken = c.token;
  } else if (url.starts_with("http://") || url.starts_with("https://")) {
    tier->base = url.rtrim('/').str();
  } else {
    return fail("not an s3://, http:// or https:// URL");
  }
  tier->handle = curl_easy_init();
  if (!tier->handle) {
    return fail("libcurl could not make a handle");
  }
  return tier;
}

RemoteTier::~RemoteTier() {
  if (handle) {
    curl_easy_cleanup(static_cast<CURL *>(handle));
  }
}

llvm::Expected<RemoteTier::Response>
RemoteTier::request(llvm::StringRef method, llvm::StringRef path,
                    llvm::StringRef body) {
  std::lock_guard<std::mutex> guard(lock);
  CURL *curl = static_cast<CURL *>(handle);
  curl_easy_reset(curl);
  std::string address = base + "/" + path.str();
  std::string verb = method.str();
  Response response;
  char detail[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, address.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  // A server that stops answering costs `timeout`, not a hang: connecting,
  // and any stretch with no bytes moving, are bounded.
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(timeout, 10.0) * 1000));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(std::max(timeout, 1.0)));
  struct curl_slist *headers = nullptr;
  if (method == "PUT") {
    // The body from memory, so that libcurl's signature hashes it.
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    headers = curl_slist_append(headers,
                                "Content-Type: application/octet-stream");
    headers = curl_slist_append(headers, "Expect:");
  } else if (method == "DELETE") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  std::string payloadHash, token;
  if (!sigv4.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERPWD, userpwd.c_str());
    // S3 wants the payload's hash as a header, signed with the rest.
    payloadHash = "x-amz-content-sha256: " + support::sha256Hex(body);
    headers = curl_slist_append(headers, payloadHash.c_str());
    if (!sessionToken.empty()) {
      token = "x-amz-security-token: " + sessionToken;
      headers = curl_slist_append(headers, token.c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode result = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (result != CURLE_OK) {
    std::string why = *detail ? detail : curl_easy_strerror(result);
    return llvm::createStringError("remote cache '" + given + "': " + verb +
                                   " " + path + ": " + why);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

llvm::Error RemoteTier::statusError(llvm::StringRef method,
                                    llvm::StringRef path,
                                    const Response &response) const {
  std::string what = "HTTP " + std::to_string(response.status);
  if (std::string code = s3ErrorCode(response.body); !code.empty()) {
    what += " " + code;
  }
  std::string where = bucket.empty() ? "" : " (bucket '" + bucket + "')";
  return llvm::createStringError("remote cache '" + given + "'" + where +
                                 ": " + method + " " + path + ": " + what);
}

llvm::Expected<std::optional<std::string>>
RemoteTier::get(llvm::StringRef path) {
  auto response = request("GET", path, "");
  if (!response) {
    return response.takeError();
  }
  if (response->status == 404) {
    return std::nullopt;
  }
  if (response->status != 200) {
    return statusError("GET", path, *response);
  }
  return std::move(response->body);
}

llvm::Error RemoteTier::put(llvm::StringRef path, llvm::StringRef bytes) {
  auto response = request("PUT", path, bytes);
  if (!response) {
    return response.takeError();
  }
  if (response->status < 200 || response->status >= 300) {
    return statusError("PUT", path, *response);
  }
  return llvm::Error::success();
}

llvm::Error RemoteTier::remove(llvm::StringRef path) {
  auto response = request("DELETE", path, "");
  if (!response) {
    return response.takeError();
  }
  if (response->status != 404 &&
      (response->status < 200 || response->status >= 300)) {
    return statusError("DELETE", path, *response);
  }
  return llvm::Error::success();
}

} // namespace kiln::cache
