# shellcheck shell=bash
# The role's read of the launcher (tasks/configure.yml): bash -c in the container's work directory, $1 the image's
# launch_online_dp.py and $2 the work directory's copy.
# 'launcher alive': the launcher's process group runs (start_vllm.sh wrote launcher.pgid).
test -s launcher.pgid && kill -0 -- "-$(cat launcher.pgid)" && echo 'launcher alive'
# 'launcher same': the copy is the image's (start_vllm.sh copies it at the next start).
cmp -s "$1" "$2" && echo 'launcher same'
exit 0
