#!/bin/sh
# nginx.sh: the nginx side of BenchmarkMirrorVsNginx (mirror_bench_test.go).
#
#   nginx.sh install
#       install Debian's nginx package when no nginx is on PATH (needs root);
#       the package's own service is not started.
#   nginx.sh run WORKDIR PORT CERT KEY ROOT
#       write WORKDIR/nginx.conf and run nginx in the foreground (daemon off,
#       as this process: the caller kills it by its pid) serving ROOT over TLS
#       on 127.0.0.1:PORT with CERT (chain PEM) and KEY; pid file, logs and
#       temporary directories stay in WORKDIR. $NGINX names the binary,
#       $NGINX_WORKERS the worker processes (2: one a core of the benchmark's
#       machine; the pinned form's nginx, on one core, has 1).
#
# The benchmark runs "run" itself; "run" can also be used by hand to compare
# with curl or wrk against the same tree.
set -eu

NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}

case "${1:-}" in
install)
	if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
		echo "nginx already installed: $NGINX"
		exit 0
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "nginx.sh install: run as root (apt-get install nginx)" >&2
		exit 1
	fi
	apt-get update -qq
	# policy-rc.d or no init system: the package's service may not start,
	# which is what the benchmark wants.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx
	;;
run)
	[ $# -eq 6 ] || { echo "usage: nginx.sh run WORKDIR PORT CERT KEY ROOT" >&2; exit 2; }
	work=$2 port=$3 cert=$4 key=$5 root=$6
	mkdir -p "$work"
	# As root, nginx would switch its workers to "nobody", who cannot enter
	# a private temporary directory; keep them as the caller.
	user=""
	if [ "$(id -u)" = 0 ]; then
		user="user $(id -un) $(id -gn);"
	fi
	cat >"$work/nginx.conf" <<EOF
$user
daemon off;
master_process on;
worker_processes ${NGINX_WORKERS:-2};
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 100000;
	types { }
	default_type application/octet-stream;
	client_body_temp_path $work/client_body;
	proxy_temp_path $work/proxy;
	fastcgi_temp_path $work/fastcgi;
	uwsgi_temp_path $work/uwsgi;
	scgi_temp_path $work/scgi;
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $cert;
		ssl_certificate_key $key;
		ssl_protocols TLSv1.2 TLSv1.3;
		# The founder's join listener asks every client for a certificate.
		ssl_verify_client optional_no_ca;
		root $root;
		location / { }
	}
}
EOF
	exec "$NGINX" -e stderr -p "$work" -c "$work/nginx.conf"
	;;
*)
	echo "usage: nginx.sh install | nginx.sh run WORKDIR PORT CERT KEY ROOT" >&2
	exit 2
	;;
esac
