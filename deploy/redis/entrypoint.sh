#!/bin/sh
# Redis with least-privilege users (see docs/operations.md, "Redis users and what each may do").
#
# Fills the SHA-256 of each password from the environment into users.acl.template (made by
# `aci-evidence acl --template`), writes the aclfile, then runs the given command (the image's
# docker-entrypoint.sh with redis-server ... --aclfile "$ACI_ACL_FILE"). Passwords are never
# written or printed: only their hashes reach the file.
set -eu

template="${ACI_ACL_TEMPLATE:-/etc/aci-redis/users.acl.template}"
out="${ACI_ACL_FILE:-/tmp/aci-redis/users.acl}"

hash_of() {
    # $1: variable name. Refuses an unset, empty or whitespace-holding password.
    eval "value=\${$1-}"
    if [ -z "$value" ]; then
        echo "aci-redis: $1 is not set" >&2
        exit 2
    fi
    case "$value" in
        *[[:space:]]*) echo "aci-redis: $1 must not contain whitespace" >&2; exit 2 ;;
        change-me*) echo "aci-redis: WARNING: $1 is still a change-me default" >&2 ;;
    esac
    printf '%s' "$value" | sha256sum | cut -d' ' -f1
}

admin=$(hash_of ACI_ACL_ADMIN_PASSWORD)
submitter=$(hash_of ACI_ACL_SUBMITTER_PASSWORD)
worker=$(hash_of ACI_ACL_WORKER_PASSWORD)
auditor=$(hash_of ACI_ACL_AUDITOR_PASSWORD)

umask 077
mkdir -p "$(dirname "$out")"
sed -e "s/@ADMIN_SHA256@/$admin/" -e "s/@SUBMITTER_SHA256@/$submitter/" \
    -e "s/@WORKER_SHA256@/$worker/" -e "s/@AUDITOR_SHA256@/$auditor/" "$template" > "$out"
# The image's entrypoint drops to the `redis` user: let it read the file.
chown -R redis "$(dirname "$out")" 2>/dev/null || true
exec "$@"
