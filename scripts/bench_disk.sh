# bench_disk.sh: sourced by the tracer benchmarks that read a file on a real disk.

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
