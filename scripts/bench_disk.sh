# bench_disk.sh: sourced by the tracer benchmarks: the files and loop devices their fio jobs read.

# Writes MB MiB of random data to PATH and drops it from the page cache, so that O_DIRECT
# reads of it reach the disk.
uncached_file() {
    dd if=/dev/urandom of="$1" bs=1M count="$2" status=none
    sync "$1"
    echo 1 > /proc/sys/vm/drop_caches
}

# The whole disk (its /sys/block name) under the file system holding PATH; empty when there is
# none, as under an overlay or a tmpfs.
whole_disk_of() {
    local source dev
    source=$(findmnt -no SOURCE --target "$1")
    dev=$(lsblk -no PKNAME "$source" 2>/dev/null | head -1)
    [[ -n $dev ]] || dev=$(basename "$source")
    [[ -e /sys/block/$dev ]] && echo "$dev"
    return 0
}

# A loop device over a new file of MB MiB of random data at PATH, for fio to read; prints its
# path. JOB=disk: every IO goes to the uncached file on PATH's disk (--direct-io=on), a real
# device's timing. Any other JOB (cpu): the cached file through the page cache, CPU-bound, where
# the tracer's CPU per IO shows most.
bench_loop_device() {
    local job=$1 img=$2 mb=$3
    if [[ $job == disk ]]; then
        uncached_file "$img" "$mb"
        losetup -f --show --direct-io=on "$img"
    else
        dd if=/dev/urandom of="$img" bs=1M count="$mb" status=none
        cat "$img" > /dev/null
        losetup -f --show --direct-io=off "$img"
    fi
}
