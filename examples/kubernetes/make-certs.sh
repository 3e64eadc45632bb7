#!/usr/bin/env bash
# Certificates for mutual TLS between kube-scheduler and the wasm-scheduler extender (docs/operating.md).
#
#   examples/kubernetes/make-certs.sh [OUT_DIR] [EXTRA_SAN ...]
#
# Makes, in OUT_DIR (default ./wasm-scheduler-pki), with openssl (1.1.1 or later):
#   ca.crt, ca.key                     a CA of their own: it signs the two below and nothing else.
#                                      Keep ca.key offline; ca.crt goes to both sides.
#   extender.crt, extender.key         the extender's serving certificate, for the Service's DNS names,
#                                      localhost and 127.0.0.1 (and every EXTRA_SAN, such as
#                                      IP:10.96.12.34 or DNS:extender.example.com); also a client
#                                      certificate, so the pod's own probes can pass --client-ca
#   kube-scheduler.crt, kube-scheduler.key
#                                      kube-scheduler's client certificate (tlsConfig.certFile/keyFile)
#
# NAMESPACE (wasm-scheduler), SERVICE (wasm-scheduler-extender) and DAYS (365) can be set in the
# environment. Existing files are never overwritten. At the end it prints the commands that put
# the extender's files into its Secret and kube-scheduler's where its pod reads them.
set -euo pipefail

out=${1:-wasm-scheduler-pki}
shift || true
namespace=${NAMESPACE:-wasm-scheduler}
service=${SERVICE:-wasm-scheduler-extender}
days=${DAYS:-365}

command -v openssl >/dev/null || { echo "make-certs.sh: openssl is not installed" >&2; exit 2; }
mkdir -p "$out"
for name in ca extender kube-scheduler; do
  if [ -e "$out/$name.key" ] || [ -e "$out/$name.crt" ]; then
    echo "make-certs.sh: $out/$name.crt or .key exists already: not overwriting (remove them, or pick another folder)" >&2
    exit 2
  fi
done
umask 077   # the keys are readable by their owner only

sans="DNS:$service,DNS:$service.$namespace,DNS:$service.$namespace.svc,DNS:$service.$namespace.svc.cluster.local"
sans="$sans,DNS:localhost,IP:127.0.0.1"
for extra in "$@"; do
  sans="$sans,$extra"
done

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# The CA.
key "$out/ca.key"
openssl req -x509 -new -key "$out/ca.key" -sha256 -days "$days" -subj "/CN=wasm-scheduler-extender-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$out/ca.crt"

# A leaf certificate signed by the CA: issue NAME COMMON_NAME EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
issue() {
  local name=$1 cn=$2 eku=$3 san=${4:-}
  local ext="$out/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    if [ -n "$san" ]; then echo "subjectAltName=$san"; fi
  } > "$ext"
  key "$out/$name.key"
  openssl req -new -key "$out/$name.key" -subj "/CN=$cn" -out "$out/$name.csr"
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
    -sha256 -days "$days" -extfile "$ext" -out "$out/$name.crt" 2>/dev/null
  rm -f "$out/$name.csr" "$ext"
}

issue extender "$service.$namespace.svc" "serverAuth,clientAuth" "$sans"
issue kube-scheduler kube-scheduler "clientAuth"
rm -f "$out/ca.srl"
chmod 644 "$out/ca.crt" "$out/extender.crt" "$out/kube-scheduler.crt"

cat <<NEXT
Made in $out: ca.crt ca.key extender.crt extender.key kube-scheduler.crt kube-scheduler.key
The extender's Secret (the Deployment mounts it at /etc/wasm-scheduler/tls):
  kubectl -n $namespace create secret generic $service-tls \\
    --from-file=tls.crt=$out/extender.crt --from-file=tls.key=$out/extender.key --from-file=ca.crt=$out/ca.crt
kube-scheduler's files, on every control-plane node (its pod mounts the folder):
  install -d -m 0700 /etc/kubernetes/wasm-scheduler
  install -m 0644 $out/ca.crt $out/kube-scheduler.crt /etc/kubernetes/wasm-scheduler/
  install -m 0600 $out/kube-scheduler.key /etc/kubernetes/wasm-scheduler/
NEXT
