#!/usr/bin/env bash
# tls_conf_certs.sh DIR: the certificates test_tls_conf uses, made at test time with the openssl
# CLI (no key is ever committed). ECDSA P-256 throughout: key generation takes milliseconds.
#   ca.pem                the server certificates' CA (what the clients trust)
#   a.pem a.key           CN=a.test, DNS:a.test (the first --tls-cert: the default)
#   b.pem b.key           CN=b.test, DNS:b.test and DNS:*.w.test
#   a2.pem a2.key         CN=a.test, O=second: what a reload puts in place of a.pem
#   c.pem c.key           CN=c.test, DNS:x.w.test (an exact name that b's wildcard also covers)
#   d.pem d.key           CN=d.test and no subjectAltName
#   cca.pem               the client certificates' CA (--tls-client-ca)
#   client.pem client.key CN=client.test, signed by cca
#   stranger.pem .key     CN=stranger.test, signed by ca: a client certificate of the wrong CA
#   expired.pem .key      CN=expired.test, signed by ca, valid only on 2020-01-01
#   garbage.pem           not a certificate at all
set -eu
dir=$1
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# ca NAME: a self-signed CA
ca() {
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.pem" -subj "/CN=$1 test CA" -days 2 \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
}

# leaf NAME CA SUBJECT SAN [openssl ca's date options]: a certificate signed by CA
leaf() {
    local name=$1 signer=$2 subj=$3 san=$4
    shift 4
    key "$name.key"
    openssl req -new -key "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
    printf 'basicConstraints = CA:FALSE\n' >"$name.ext"
    [ "$san" = none ] || printf 'subjectAltName = %s\n' "$san" >>"$name.ext"
    if [ $# -eq 0 ]; then
        openssl x509 -req -in "$name.csr" -CA "$signer.pem" -CAkey "$signer.key" \
            -set_serial "0x$(od -An -N8 -tx1 /dev/urandom | tr -d " \n")" -out "$name.pem" -days 2 -extfile "$name.ext" 2>/dev/null
    else # dates in the past: only openssl ca sets them (3.0's x509 has no -not_after)
        : >index.txt && echo 01 >serial
        printf '[d]\ndatabase = index.txt\nserial = serial\nnew_certs_dir = .\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n' >ca.cnf
        openssl ca -batch -config ca.cnf -name d -cert "$signer.pem" -keyfile "$signer.key" \
            -in "$name.csr" -out "$name.pem" -notext -extfile "$name.ext" "$@" \
            2>/dev/null
        rm -f ca.cnf index.txt* serial* 01.pem
    fi
    rm -f "$name.csr" "$name.ext"
}

ca ca
ca cca
leaf a ca /CN=a.test DNS:a.test
leaf b ca /CN=b.test DNS:b.test,DNS:*.w.test
leaf a2 ca "/O=second/CN=a.test" DNS:a.test
leaf c ca /CN=c.test DNS:x.w.test
leaf d ca /CN=d.test none
leaf client cca /CN=client.test DNS:client.test
leaf stranger ca /CN=stranger.test DNS:stranger.test
leaf expired ca /CN=expired.test DNS:expired.test -startdate 20200101000000Z -enddate 20200102000000Z
printf -- '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n' >garbage.pem
