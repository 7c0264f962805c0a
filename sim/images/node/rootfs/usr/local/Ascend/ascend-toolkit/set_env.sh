# a3sim: stand-in for CANN's set_env.sh (environment only; there is no CANN library here).
# shellcheck shell=sh
export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest
export ASCEND_HOME_PATH=$ASCEND_TOOLKIT_HOME
export ASCEND_OPP_PATH=$ASCEND_TOOLKIT_HOME/opp
export ASCEND_AICPU_PATH=$ASCEND_TOOLKIT_HOME
