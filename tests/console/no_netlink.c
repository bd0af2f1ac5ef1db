/* Loaded into Chromium (LD_PRELOAD) by the console's browser tests: its NETLINK_ROUTE socket fails, so
 * Chromium's address tracker takes its "always online" path and never hears of the interfaces and
 * addresses other tests add and remove in the root network namespace (the fault harness's bridge).
 * Hearing of them, Chromium aborts every connection it is still setting up with ERR_NETWORK_CHANGED,
 * however local (a TLS handshake with 127.0.0.1 on a loaded machine). Every other socket is libc's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
    static int (*libc_socket)(int, int, int);
    if (domain == AF_NETLINK && protocol == NETLINK_ROUTE) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (libc_socket == NULL) {
        libc_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    }
    return libc_socket(domain, type, protocol);
}
