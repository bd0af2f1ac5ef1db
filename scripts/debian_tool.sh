# Sourced by scripts/bootstrap.sh and scripts/kafka/install.sh (from the project's root).
# debian_tool WHO COMMAND [PACKAGE]: when COMMAND is missing, installs PACKAGE (default: COMMAND) with
# apt-get as root on Debian or Ubuntu, else says what to install and exits 1; WHO starts the messages.
debian_tool() {
    command -v "$2" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "$1: $2 is missing; install it (Debian/Ubuntu: apt-get install ${3:-$2}) and run again" >&2
        exit 1
    fi
    echo "$1: installing ${3:-$2} (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${3:-$2}" >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${3:-$2}" >/dev/null
    }
}
