# shellcheck shell=bash
# `cluster.sh build`: root file systems, the node image, the substitute vllm-ascend image (pushed to the
# local registry) and the artifacts the collection installs from the controller (etcd archive, yuanrong
# wheel). Each piece is keyed by a sha256 of its inputs and reused while the key is unchanged.
#
# Keys:
#   rootfs  = suite + variant + package list + the source of rootfs_build (a package-list change, or a
#             change of how a root file system is made, rebuilds it; nothing else does: ~60 s each)
#   images  = rootfs key + the files that go in (sim/images/<kind>/, sim/tools/ or sim/engine/,
#             sim/lib/identity.py) + the pinned download specs + this file (sim/lib/build.sh)
# Downloads (wheels, sdist) are keyed by their spec; an image is checked with `docker image inspect`
# before any download, so a warm run (or a fresh clone on a machine whose engine has the images)
# downloads nothing.

NODE_PACKAGES=(systemd systemd-sysv dbus docker.io iptables python3 python3-docker iproute2 procps
  ca-certificates curl tzdata kmod keepalived python3-apt)
# keepalived (and python3-apt, which ansible.builtin.package needs on Debian): the proxy role's virtual IP (proxy_vip);
# installed here because a node in a network namespace of its own
# (A3SIM_NET=netns) reaches no package mirror.
SUB_PACKAGES=(python3 python3-pip python3-venv python-is-python3 git ca-certificates procps iproute2
  numactl curl net-tools haproxy)
# haproxy: the serving edge of proxy_engine vllm-router. A site runs the official haproxy image there
# (proxy_edge_image); inventories/sim runs it from the substitute image, which has no registry of its own here.

# What the substitute image installs from wheels downloaded on the host (Debian 12 = CPython 3.11).
# uvicorn's standard extras (uvloop, httptools) and sniffio as a vLLM image has them (vLLM asks for fastapi[standard]):
# the proxy runs on uvloop and httptools there, so it does here.
# pyzmq as vLLM itself requires it: the proxy wrapper registers the backends with vllm-router over ZMQ.
SUB_WHEELS=("fastapi<0.124.0" httpx "uvicorn[standard]" sniffio pyzmq)
# The seed's pins (patches role), carried in the image at /opt/a3sim/wheels for an index-free
# `pip install --no-deps --force-reinstall` (inventories/sim: patches_pip_index_args).
PIN_WHEELS=(transformers==5.2.0 huggingface_hub==1.5.0)
# proxy_engine vllm-router: the proxy role pip-installs this pin (with its dependencies) into a venv on the proxy
# host; inventories/sim points its pip at /opt/a3sim/wheels too (proxy_router_pip_args).
ROUTER_WHEELS=("$(sed -n 's/^proxy_router_package: *\([^ #]*\).*/\1/p' "$SIM_DIR/../roles/proxy/defaults/main.yml")")
# pip does not widen a manylinux_2_N platform to older ones: list glibc 2.36 (Debian 12) down to 2.17.
WHEEL_TARGET=(--only-binary :all: --python-version 3.11 --implementation cp --abi cp311)
for _glibc in $(seq 36 -1 17); do WHEEL_TARGET+=(--platform "manylinux_2_${_glibc}_x86_64"); done
WHEEL_TARGET+=(--platform manylinux2014_x86_64 --platform linux_x86_64)
unset _glibc
VLLM_ASCEND_VERSION=0.18.0
SOC_VERSION_FOR_SDIST=ascend910_9391
YUANRONG_SPEC=openyuanrong-datasystem==0.8.1

ARTIFACTS_ENV=$CACHE_DIR/artifacts.env

# ---- host configuration --------------------------------------------------------------------------
APT_SOURCES_DIR=${APT_SOURCES_DIR:-/etc/apt/sources.list.d}
APT_SOURCES_LIST=${APT_SOURCES_LIST:-/etc/apt/sources.list}

# debian_mirror: the Debian mirror of this machine's own apt configuration (never a fixed host name).
debian_mirror() {
  if [ -n "${A3SIM_DEBIAN_MIRROR:-}" ]; then
    echo "$A3SIM_DEBIAN_MIRROR"
    return 0
  fi
  local f uri=""
  for f in "$APT_SOURCES_DIR"/*.sources; do
    [ -e "$f" ] || continue
    uri=$(awk -v suite="$SUITE" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "") { print uri; found = 1; exit }
        types = ""; suites = ""; uri = ""
      }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]*#/ { next }
      tolower($1) == "types:"  { $1 = ""; types = $0 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      tolower($1) == "uris:"   { uri = $2 }
      END { if (!found) flush() }
    ' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ] && [ -e "$APT_SOURCES_LIST" ]; then
    uri=$(awk -v suite="$SUITE" '
      $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == suite) { print $i; exit } }
    ' "$APT_SOURCES_LIST")
  fi
  [ -n "$uri" ] || return 1
  echo "$uri"
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# ---- root file systems ---------------------------------------------------------------------------
rootfs_key() { # KIND PACKAGES...
  local kind=$1
  shift
  { echo "$kind $SUITE minbase $*"; declare -f rootfs_build; } | hash_text
}

# rootfs_build KIND IMAGE PACKAGES...: debootstrap + trim + docker import.
rootfs_build() {
  local kind=$1 image=$2
  shift 2
  local mirror dir
  mirror=$(debian_mirror) || die "no Debian mirror for '$SUITE' in $APT_SOURCES_DIR/*.sources or $APT_SOURCES_LIST (set A3SIM_DEBIAN_MIRROR)"
  dir=$CACHE_DIR/rootfs/$kind
  rm -rf "$dir"
  mkdir -p "$dir" "$CACHE_DIR/debs/$kind"
  log "[$kind] debootstrap --variant=minbase $SUITE from $mirror with: $*"
  # unsafe-io: no fsync per unpacked file (the root file system is thrown away on failure anyway);
  # measured 63 s -> 38 s for the substitute's package set. DPKG_FORCE replaces dpkg's default force
  # options, so those (security-mac, downgrade) are listed too.
  DPKG_FORCE=unsafe-io,security-mac,downgrade debootstrap --variant=minbase --cache-dir="$CACHE_DIR/debs/$kind" \
    --include="$(IFS=,; echo "$*")" "$SUITE" "$dir" "$mirror" ||
    die "[$kind] debootstrap failed (log: $dir/debootstrap/debootstrap.log)"
  # debootstrap unmounts the target's /proc and /sys itself, but a package's scripts can keep one busy (seen once:
  # the node's /proc still mounted, and tar then read the host's processes and failed): unmount what is left.
  local mnt
  while read -r mnt; do
    umount -l "$mnt" || die "[$kind] cannot unmount $mnt"
    log "[$kind] unmounted $mnt, left mounted by debootstrap"
  done < <(findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r)
  # Trim what a container never needs; the engine provides hostname, hosts and resolv.conf.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/cache/apt/*.bin "$dir"/var/lib/apt/lists/* \
    "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* \
    "$dir"/var/log/*.log "$dir"/root/.cache
  rm -f "$dir"/etc/hostname "$dir"/etc/resolv.conf
  : >"$dir/etc/machine-id"
  log "[$kind] import as $image ($(du -sh "$dir" | cut -f1))"
  tar -C "$dir" --numeric-owner -cf - . |
    docker import --change "LABEL a3sim.rootfs=$kind" --change 'CMD ["/bin/bash"]' - "$image" >/dev/null ||
    die "[$kind] docker import failed"
  rm -rf "$dir"
}

# ensure_rootfs_images: makes the missing root file system images, both at once (the downloads of two
# debootstraps overlap), but only for an image that is itself missing: an image needs its root file
# system only to be built.
ensure_rootfs_images() {
  local -A rootfs=([node]=$NODE_ROOTFS [vllm]=$SUB_ROOTFS) final=([node]=$NODE_IMAGE [vllm]=$VLLM_IMAGE)
  local -a pids=() kinds=() pkgs
  local kind
  for kind in node vllm; do
    if image_exists "${rootfs[$kind]}"; then
      log "root file system ${rootfs[$kind]}: cached"
      continue
    fi
    image_exists "${final[$kind]}" && continue
    if [ "$kind" = node ]; then pkgs=("${NODE_PACKAGES[@]}"); else pkgs=("${SUB_PACKAGES[@]}"); fi
    mkdir -p "$CACHE_DIR/logs"
    (rootfs_build "$kind" "${rootfs[$kind]}" "${pkgs[@]}") >"$CACHE_DIR/logs/rootfs-$kind.log" 2>&1 &
    pids+=($!)
    kinds+=("$kind")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  step "debootstrap root file systems: ${kinds[*]} (parallel; logs in $CACHE_DIR/logs/)"
  local i failed="" waited=0 running
  # Heartbeat every 15 s: the last debootstrap stage of each build.
  while :; do
    running=0
    for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && running=1; done
    [ "$running" = 1 ] || break
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 15)) = 0 ]; then
      for i in "${kinds[@]}"; do
        log "  [$i] $(grep -E '^I: ' "$CACHE_DIR/logs/rootfs-$i.log" | tail -n1 || true)"
      done
    fi
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then failed="$failed ${kinds[$i]}"; fi
  done
  for i in "${kinds[@]}"; do
    grep -E '^\[a3sim' "$CACHE_DIR/logs/rootfs-$i.log" >&2 || true
  done
  if [ -n "$failed" ]; then
    for i in $failed; do tail -n 25 "$CACHE_DIR/logs/rootfs-$i.log" >&2; done
    die "root file system build failed for:$failed"
  fi
  step_done
}

# ---- downloads (host pip, package registry only) -------------------------------------------------
# pip_quiet PYTHON ARGS...: runs PYTHON -m pip -q ARGS, dropping the host configuration's warnings about
# absent local indexes.
pip_quiet() {
  local python=$1
  shift
  "$python" -m pip -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
download_wheels() { # -> $WHEELS_DIR with requirements.txt
  local key
  key=$(printf '%s\n' "${SUB_WHEELS[@]}" "${WHEEL_TARGET[@]}" | hash_text)
  WHEELS_DIR=$CACHE_DIR/wheels/base-$key
  if [ -e "$WHEELS_DIR/.complete" ]; then
    log "wheels (${SUB_WHEELS[*]}): cached in $WHEELS_DIR"
    return 0
  fi
  step "download wheels: ${SUB_WHEELS[*]}"
  rm -rf "$WHEELS_DIR"
  mkdir -p "$WHEELS_DIR"
  pip_quiet python3 download "${WHEEL_TARGET[@]}" -d "$WHEELS_DIR" "${SUB_WHEELS[@]}" ||
    die "pip download ${SUB_WHEELS[*]} failed"
  printf '%s\n' "${SUB_WHEELS[@]}" >"$WHEELS_DIR/requirements.txt"
  touch "$WHEELS_DIR/.complete"
  step_done "$(find "$WHEELS_DIR" -name '*.whl' | wc -l) wheels"
}

download_pins() { # -> $PINS_DIR
  local key
  key=$(printf '%s\n' "${PIN_WHEELS[@]}" "${ROUTER_WHEELS[@]}" "${WHEEL_TARGET[@]}" | hash_text)
  PINS_DIR=$CACHE_DIR/wheels/pins-$key
  if [ -e "$PINS_DIR/.complete" ]; then
    log "pinned wheels (${PIN_WHEELS[*]}): cached"
    return 0
  fi
  step "download pinned wheels: ${PIN_WHEELS[*]} ${ROUTER_WHEELS[*]}"
  rm -rf "$PINS_DIR"
  mkdir -p "$PINS_DIR"
  pip_quiet python3 download --no-deps -d "$PINS_DIR" "${PIN_WHEELS[@]}" || die "pip download ${PIN_WHEELS[*]} failed"
  pip_quiet python3 download "${WHEEL_TARGET[@]}" -d "$PINS_DIR" "${ROUTER_WHEELS[@]}" ||
    die "pip download ${ROUTER_WHEELS[*]} failed"
  touch "$PINS_DIR/.complete"
  step_done "$(find "$PINS_DIR" -name '*.whl' | wc -l) wheels"
}

download_sdist() { # -> $SDIST_FILE
  local dir=$CACHE_DIR/sdist venv=$CACHE_DIR/venv-sdist
  SDIST_FILE=$(find "$dir" -maxdepth 1 -name "vllm[-_]ascend-$VLLM_ASCEND_VERSION.tar.gz" 2>/dev/null | head -n1 || true)
  if [ -n "$SDIST_FILE" ]; then
    log "vllm-ascend $VLLM_ASCEND_VERSION sdist: cached ($SDIST_FILE)"
    return 0
  fi
  step "download vllm-ascend $VLLM_ASCEND_VERSION sdist"
  mkdir -p "$dir"
  if ! [ -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || die "python3 -m venv failed (install python3-venv)"
  fi
  pip_quiet "$venv/bin/python" install setuptools setuptools-scm wheel || die "pip install setuptools-scm wheel failed"
  # Metadata generation of vllm-ascend needs SOC_VERSION and no build isolation.
  SOC_VERSION=$SOC_VERSION_FOR_SDIST pip_quiet "$venv/bin/python" download --no-deps --no-binary :all: \
    --no-build-isolation "vllm-ascend==$VLLM_ASCEND_VERSION" -d "$dir" ||
    die "pip download vllm-ascend==$VLLM_ASCEND_VERSION failed"
  SDIST_FILE=$(find "$dir" -maxdepth 1 -name "vllm[-_]ascend-$VLLM_ASCEND_VERSION.tar.gz" | head -n1)
  [ -n "$SDIST_FILE" ] || die "the vllm-ascend sdist is not in $dir after pip download"
  step_done "$(du -h "$SDIST_FILE" | cut -f1)"
}

download_yuanrong() { # -> $YUANRONG_WHEEL (not in any image: the yuanrong role installs it)
  local dir=$CACHE_DIR/wheels/yuanrong
  YUANRONG_WHEEL=$(find "$dir" -maxdepth 1 -name 'openyuanrong_datasystem-*.whl' 2>/dev/null | sort | tail -n1 || true)
  if [ -n "$YUANRONG_WHEEL" ]; then
    log "yuanrong wheel: cached ($(basename "$YUANRONG_WHEEL"))"
    return 0
  fi
  step "download $YUANRONG_SPEC wheel"
  mkdir -p "$dir"
  pip_quiet python3 download --no-deps "${WHEEL_TARGET[@]}" -d "$dir" "$YUANRONG_SPEC" ||
    die "pip download $YUANRONG_SPEC failed"
  YUANRONG_WHEEL=$(find "$dir" -maxdepth 1 -name 'openyuanrong_datasystem-*.whl' | sort | tail -n1)
  [ -n "$YUANRONG_WHEEL" ] || die "no openyuanrong_datasystem wheel in $dir after pip download"
  step_done "$(du -h "$YUANRONG_WHEEL" | cut -f1)"
}

# ---- release-layout archives (etcd, Prometheus) from the host's Debian binaries --------------------
# pack_release_archive ARCHIVE NAME BIN...: ARCHIVE (a .tar.gz) holds NAME/ with the BINs, as the upstream
# releases do; rebuilt only when missing or older than a BIN. Reproducible: fixed order, owner and time, no
# gzip timestamp.
pack_release_archive() {
  local archive=$1 name=$2 bin stale=0 tmp
  shift 2
  [ -s "$archive" ] || stale=1
  for bin in "$@"; do [ "$bin" -nt "$archive" ] && stale=1; done
  [ "$stale" = 1 ] || return 0
  step "$(basename "$archive") from $*"
  tmp=$(mktemp -d)
  mkdir -p "$tmp/$name" "$(dirname "$archive")"
  cp "$@" "$tmp/$name/"
  chmod 0755 "$tmp/$name"/*
  tar -C "$tmp" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$name" | gzip -n >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  rm -rf "$tmp"
  step_done
}

build_etcd_archive() { # -> $ETCD_ARCHIVE, $ETCD_SHA256
  local etcd_bin etcdctl_bin version name
  etcd_bin=$(command -v etcd) || die "etcd not found (apt-get install etcd-server)"
  etcdctl_bin=$(command -v etcdctl) || die "etcdctl not found (apt-get install etcd-client)"
  version=$("$etcd_bin" --version | awk '/^etcd Version:/ { print $3 }')
  [ -n "$version" ] || die "cannot read the version of $etcd_bin"
  name=etcd-v$version-linux-amd64
  ETCD_ARCHIVE=$CACHE_DIR/etcd/$name.tar.gz
  pack_release_archive "$ETCD_ARCHIVE" "$name" "$etcd_bin" "$etcdctl_bin"
  ETCD_SHA256=$(sha256sum "$ETCD_ARCHIVE" | cut -d' ' -f1)
  echo "$ETCD_SHA256  $(basename "$ETCD_ARCHIVE")" >"$ETCD_ARCHIVE.sha256"
  log "etcd archive: $ETCD_ARCHIVE sha256 $ETCD_SHA256"
}

build_prometheus_archive() { # -> $PROMETHEUS_ARCHIVE (the monitoring role installs it on the proxy host)
  local prom_bin promtool_bin version name
  prom_bin=$(command -v prometheus) || die "prometheus not found (apt-get install prometheus)"
  promtool_bin=$(command -v promtool) || die "promtool not found (apt-get install prometheus)"
  # "prometheus, version 2.42.0+ds (branch: ...)": the release number without Debian's +ds suffix
  version=$("$prom_bin" --version 2>&1 | awk '/^prometheus, version/ { sub(/[+~-].*/, "", $3); print $3 }')
  [ -n "$version" ] || die "cannot read the version of $prom_bin"
  name=prometheus-$version.linux-amd64
  PROMETHEUS_ARCHIVE=$CACHE_DIR/prometheus/$name.tar.gz
  pack_release_archive "$PROMETHEUS_ARCHIVE" "$name" "$prom_bin" "$promtool_bin"
  log "Prometheus archive: $PROMETHEUS_ARCHIVE"
}

# ---- image keys ----------------------------------------------------------------------------------
# Files are hashed without Python byte-code caches (tests create them).
src_hash() { # DIR (missing dir hashes as "absent")
  if [ -d "$1" ]; then hash_dir "$1"; else echo "absent:$1"; fi
}

compute_image_names() {
  local build_sh=$SIM_DIR/lib/build.sh
  NODE_ROOTFS=a3sim/rootfs-node:$(rootfs_key node "${NODE_PACKAGES[@]}")
  SUB_ROOTFS=a3sim/rootfs-vllm:$(rootfs_key vllm "${SUB_PACKAGES[@]}")
  NODE_IMAGE=a3sim/node:$({
    echo "$NODE_ROOTFS"
    src_hash "$SIM_DIR/images/node"
    src_hash "$SIM_DIR/tools"
    sha256sum <"$SIM_DIR/lib/identity.py"
    sha256sum <"$build_sh"
  } | hash_text)
  VLLM_IMAGE=a3sim/vllm-ascend:$({
    echo "$SUB_ROOTFS"
    src_hash "$SIM_DIR/images/vllm-ascend"
    src_hash "$SIM_DIR/engine"
    printf '%s\n' "${SUB_WHEELS[@]}" "${WHEEL_TARGET[@]}" "vllm-ascend==$VLLM_ASCEND_VERSION"
    sha256sum <"$build_sh"
  } | hash_text)
}

# copy_tree SRC DST: copies a source tree without byte-code caches.
copy_tree() {
  mkdir -p "$2"
  tar -C "$1" --exclude=__pycache__ --exclude='*.pyc' --exclude=.pytest_cache -cf - . | tar -C "$2" -xf -
}

# docker_build IMAGE BASE CTX: the classic builder (no buildx needed), no network for RUN steps.
docker_build() {
  local logf=$CACHE_DIR/logs/build-${1//[\/:]/_}.log
  mkdir -p "$CACHE_DIR/logs"
  if ! DOCKER_BUILDKIT=0 docker build --network none --build-arg "BASE_IMAGE=$2" \
    --label "a3sim.image=$1" -t "$1" "$3" >"$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    die "docker build of $1 failed (full log: $logf, context: $3)"
  fi
}

build_node_image() {
  if image_exists "$NODE_IMAGE"; then
    log "node image $NODE_IMAGE: cached"
    return 0
  fi
  step "build node image $NODE_IMAGE"
  local ctx=$CACHE_DIR/ctx/node tools=$SIM_DIR/tools t
  rm -rf "$ctx"
  copy_tree "$SIM_DIR/images/node" "$ctx"
  mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/usr/local/Ascend/driver/tools" "$ctx/rootfs/usr/local/sbin"
  # npu-smi is bind-mounted alone into the vllm container (seed step 2), hccn_tool with the whole driver
  # directory: both are the same sh front end (sim/tools/npu-smi links to hccn_tool), and the Python
  # implementations sit in the driver directory, where the front end finds them in either place.
  for t in npu-smi:usr/local/bin hccn_tool:usr/local/Ascend/driver/tools hccn_tool.py:usr/local/Ascend/driver/tools \
    npu_smi.py:usr/local/Ascend/driver/tools a3sim_tools.py:usr/local/Ascend/driver/tools; do
    if [ -f "$tools/${t%%:*}" ]; then
      cp "$tools/${t%%:*}" "$ctx/rootfs/${t#*:}/"
    else
      warn "sim/tools/${t%%:*} is missing: the node image gets a placeholder that fails"
      printf '#!/bin/sh\necho "a3sim: sim/tools/%s was missing when this image was built" >&2\nexit 3\n' \
        "${t%%:*}" >"$ctx/rootfs/${t#*:}/${t%%:*}"
    fi
  done
  # The image carries p0's NPU network configuration; `up` writes each node's own.
  identity hccn-conf "${NODES[0]}" >"$ctx/rootfs/etc/hccn.conf"
  docker_build "$NODE_IMAGE" "$NODE_ROOTFS" "$ctx"
  rm -rf "$ctx"
  step_done "$(image_size "$NODE_IMAGE")"
}

build_vllm_image() {
  if image_exists "$VLLM_IMAGE"; then
    log "substitute image $VLLM_IMAGE: cached"
    return 0
  fi
  download_wheels
  download_pins
  download_sdist
  step "build substitute image $VLLM_IMAGE"
  local ctx=$CACHE_DIR/ctx/vllm-ascend engine=$SIM_DIR/engine
  rm -rf "$ctx"
  copy_tree "$SIM_DIR/images/vllm-ascend" "$ctx"
  mkdir -p "$ctx/wheels" "$ctx/pins" "$ctx/vllm-ascend" "$ctx/vllm"
  cp "$WHEELS_DIR"/*.whl "$WHEELS_DIR/requirements.txt" "$ctx/wheels/"
  cp "$PINS_DIR"/*.whl "$ctx/pins/"
  tar -C "$ctx/vllm-ascend" --strip-components=1 -xzf "$SDIST_FILE"
  if [ -d "$engine/vllm_sim" ]; then
    copy_tree "$engine" "$ctx/vllm"
  elif [ -f "$engine/__main__.py" ]; then
    copy_tree "$engine" "$ctx/vllm/vllm_sim"
  else
    warn "sim/engine has no vllm_sim package yet: the image gets a placeholder 'vllm' that fails"
    mkdir -p "$ctx/vllm/vllm_sim"
    : >"$ctx/vllm/vllm_sim/__init__.py"
    printf 'import sys\nsys.exit("a3sim: placeholder, sim/engine was missing when this image was built")\n' \
      >"$ctx/vllm/vllm_sim/__main__.py"
  fi
  docker_build "$VLLM_IMAGE" "$SUB_ROOTFS" "$ctx"
  rm -rf "$ctx"
  step_done "$(image_size "$VLLM_IMAGE")"
}

image_size() { docker image inspect -f '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }

# push_vllm_image: tags and pushes unless the registry already holds this very image: its manifest
# names this image's config, and every blob it names (config and layers) is there. The registry may have
# been started by another checkout whose storage is gone (a deleted CI clone): the manifest alone says
# nothing then, and a pull would fail on every node.
push_vllm_image() {
  local id remote
  id=$(docker image inspect -f '{{.Id}}' "$VLLM_IMAGE")
  remote=$(curl -fsS -m 10 -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$REGISTRY_ADDR/v2/$(registry_repo)/manifests/$(registry_tag)" 2>/dev/null |
    python3 -c '
import json, sys, urllib.request
base, m = sys.argv[1], json.load(sys.stdin)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for d in [m["config"]["digest"]] + [layer["digest"] for layer in m["layers"]]:
    opener.open(urllib.request.Request(base + d, method="HEAD"), timeout=10)
print(m["config"]["digest"])' "http://$REGISTRY_ADDR/v2/$(registry_repo)/blobs/" 2>/dev/null || true)
  docker tag "$VLLM_IMAGE" "$VLLM_IMAGE_REF"
  if [ "$remote" = "$id" ]; then
    log "registry: $VLLM_IMAGE_REF is up to date (manifest and blobs)"
    return 0
  fi
  step "push $VLLM_IMAGE_REF"
  docker push -q "$VLLM_IMAGE_REF" >/dev/null || die "docker push $VLLM_IMAGE_REF failed"
  step_done
}
registry_repo() { local r=${VLLM_IMAGE_REF#*/}; echo "${r%:*}"; }
registry_tag() { echo "${VLLM_IMAGE_REF##*:}"; }

# prune_old_images: drops earlier builds of the node and substitute images that no container uses.
# The root file system images stay: they are the cache that makes an image rebuild take seconds.
prune_old_images() {
  local repo ref id keep
  for repo in a3sim/node a3sim/vllm-ascend; do
    if [ "$repo" = a3sim/node ]; then keep=$NODE_IMAGE; else keep=$VLLM_IMAGE; fi
    docker image ls --format '{{.Repository}}:{{.Tag}} {{.ID}}' "$repo" | while read -r ref id; do
      [ "$ref" = "$keep" ] && continue
      [ -z "$(docker ps -a -q --filter "ancestor=$id")" ] || continue
      docker rmi "$ref" >/dev/null 2>&1 || continue
      # An image once pushed keeps a digest reference: remove it too when no tag is left.
      if [ "$(docker image inspect -f '{{len .RepoTags}}' "$id" 2>/dev/null)" = 0 ]; then
        docker rmi "$id" >/dev/null 2>&1 || true
      fi
      log "pruned old image $ref"
    done
  done
}

write_artifacts_env() {
  cat >"$ARTIFACTS_ENV" <<EOF
# Written by sim/cluster.sh build: what the simulated cluster runs and what the collection installs.
A3SIM_NODE_IMAGE=$NODE_IMAGE
A3SIM_VLLM_IMAGE=$VLLM_IMAGE
A3SIM_VLLM_IMAGE_REF=$VLLM_IMAGE_REF
A3SIM_ETCD_ARCHIVE=$ETCD_ARCHIVE
A3SIM_ETCD_SHA256=$ETCD_SHA256
A3SIM_YUANRONG_WHEEL=$YUANRONG_WHEEL
A3SIM_YUANRONG_SHA256=$(sha256sum "$YUANRONG_WHEEL" | cut -d' ' -f1)
A3SIM_VLLM_ASCEND_SDIST=$SDIST_FILE
EOF
}

cmd_build() {
  cmd_deps
  local t
  t=$(date +%s.%N)
  mkdir -p "$CACHE_DIR"
  compute_image_names
  ensure_rootfs_images
  build_node_image
  build_vllm_image
  push_vllm_image
  prune_old_images
  build_etcd_archive
  build_prometheus_archive
  download_yuanrong
  download_sdist   # also for the engine simulator's tests (test.sh), even when the image was cached
  write_artifacts_env
  log "build: done in $(_elapsed "$t") s; node image $NODE_IMAGE, substitute $VLLM_IMAGE -> $VLLM_IMAGE_REF"
  log "artifacts: $ARTIFACTS_ENV"
}
