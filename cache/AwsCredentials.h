//===- AwsCredentials.h - the credentials an S3 tier signs with -*- C++ -*-===//
//
// Where the S3 tier (Remote.h) finds its AWS credentials, in the order the
// AWS SDKs look: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN; the profile AWS_PROFILE (or `default`) of
// ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE); the container
// credentials endpoint of ECS tasks, AWS Batch jobs and EKS Pod Identity
// (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
// AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE), whose credentials
// expire. EC2 instance metadata and STS web identity are not asked.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_AWSCREDENTIALS_H
#define KILN_CACHE_AWSCREDENTIALS_H

#include "llvm/Support/Error.h"

#include <string>

namespace kiln::cache {

struct AwsCredentials {
  std::string id, secret, token;
  double expires = 0; // seconds since the epoch; 0: never
};

/// The first credentials found; an error naming the endpoint when the
/// container endpoint is set but gives none, or saying where Kiln looked.
llvm::Expected<AwsCredentials> findAwsCredentials();

} // namespace kiln::cache

#endif // KILN_CACHE_AWSCREDENTIALS_H
