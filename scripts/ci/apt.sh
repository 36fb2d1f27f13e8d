# Sourced by .ci/run and scripts/ci/*.sh: apt_install PKG... installs Debian packages
# (apt-get update first, once per shell), as root or through passwordless sudo, and fails
# with a message saying what is missing when neither apt-get nor a way to root exists.
apt_install() {
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "need Debian packages $* but apt-get is not available; install them by other means" >&2
		return 1
	fi
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "need Debian packages $*: not root and sudo is not available" >&2
			return 1
		fi
		sudo=(sudo -n)
	fi
	if [ -z "${APT_UPDATED:-}" ]; then
		DEBIAN_FRONTEND=noninteractive ${sudo[@]+"${sudo[@]}"} apt-get update -qq
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive ${sudo[@]+"${sudo[@]}"} apt-get install -y -qq "$@" >/dev/null
}
