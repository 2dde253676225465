#!/bin/sh
# An `ssh` for OpenMPI (--mca plm_rsh_agent) whose hosts are network namespaces on this machine:
# the multi-host test (cli_multihost_test.cpp) plays two hosts so. TITAN_NETNS_HOSTS lists
# "HOST=NAMESPACE" pairs; mpirun calls `netns_rsh.sh HOST COMMAND...` (COMMAND is one shell line,
# as ssh would hand it to the remote shell), and it runs in HOST's namespace.
host=$1
shift
for pair in $TITAN_NETNS_HOSTS; do
  if [ "${pair%%=*}" = "$host" ]; then
    exec ip netns exec "${pair#*=}" /bin/sh -c "$*"
  fi
done
echo "netns_rsh.sh: no namespace for host '$host' in TITAN_NETNS_HOSTS='$TITAN_NETNS_HOSTS'" >&2
exit 255
