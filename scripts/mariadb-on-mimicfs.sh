#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Debian's MariaDB with its datadir on mimicfs (issue 5): seed 000's case scaled
# down (a ROW_FORMAT=COMPRESSED table filled, then ALTER TABLE ... ADD COLUMN) on
# nfs, ideal, xfs and ext4, a PAGE_COMPRESSED table dropped on each, and a
# database dropped while another process holds a table's file open. Prints
# the table of `scripts/scenarios.sh --scenario mariadb`. Installs mariadb-server
# if missing; each run starts its own mariadbd with its datadir on the mount and
# a private socket, whatever the package's own service does.
#
#   scripts/mariadb-on-mimicfs.sh [--check]
#
# --check also asserts what the seed says Debian's MariaDB shows: it carries the
# MDEV-32268 fix (fallocate() first; when NFS refuses it, its own zero writes), so
# on nfs fallocate is refused and the tablespace still ends in one extent; and
# that on nfs the held file is silly-renamed, so DROP DATABASE fails with
# errno 39 (Directory not empty), where ext4 drops it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --with mariadb-server
export PATH="$PATH:/usr/sbin"
"$root/scripts/build.sh" >/dev/null
driver="$root/build/tools/mimicfs-scenarios"
json=$("$driver" --scenario mariadb --json)
# The table, from the same runs.
perl -MJSON::PP -e '
  my $rows = decode_json(join "", <STDIN>)->{scenarios}[0]{rows};
  printf "%-28s %-7s %8s %7s %8s %8s %8s %9s %11s %11s %10s\n", qw(strategy profile writes fsyncs refused punches unlinks ibd_files ibd_extents emulated_s unlink_ms);
  printf "%-28s %-7s %8d %7d %8d %8d %8d %9d %11d %11.4f %10.3f\n", @$_{qw(strategy profile writes fsyncs fallocate_refused punches unlinks ibd_files ibd_extents)}, $_->{emulated_ns} / 1e9, $_->{unlink_emulated_ns} / 1e6 for @$rows;
  print "\nDROP DATABASE while another process on the mount holds a table open:\n";
  printf "%-7s %-14s %s\n", $_->{profile}, $_->{notes}{drop}, $_->{notes}{left}
    for grep { $_->{strategy} eq "drop_database_held_open" } @$rows;
' <<<"$json"
[ "${1:-}" = --check ] || exit 0

perl -MJSON::PP -e '
  my $doc = decode_json(join "", <STDIN>);
  my %row = map { ("$_->{strategy}/$_->{profile}" => $_) } @{$doc->{scenarios}[0]{rows}};
  my @failed;
  my $nfs = $row{"alter_compressed_table/nfs"};
  my $ideal = $row{"alter_compressed_table/ideal"};
  push @failed, "nfs: no fallocate was refused" unless $nfs->{fallocate_refused} > 0;
  push @failed, "nfs: $nfs->{ibd_files} .ibd files have $nfs->{ibd_extents} extents, not one each"
    unless $nfs->{ibd_files} > 0 && $nfs->{ibd_extents} == $nfs->{ibd_files};
  push @failed, "ideal: fallocate was refused" unless $ideal->{fallocate_refused} == 0;
  push @failed, "drop: no unlink" unless $row{"drop_page_compressed_table/nfs"}{unlinks} >= 1;
  push @failed, "nfs: no emulated time" unless $nfs->{emulated_ns} > 0;
  my ($plain, $punched) = map { $row{"$_/xfs"}{unlink_emulated_ns} } qw(drop_plain_table drop_page_compressed_table);
  push @failed, "xfs: dropping the page-compressed table ($punched ns) costs no more than the plain one ($plain ns)"
    unless $punched > $plain;
  push @failed, "ideal: emulated time $ideal->{emulated_ns}, not 0" unless $ideal->{emulated_ns} == 0;
  my ($held_nfs, $held_ext4) = map { $row{"drop_database_held_open/$_"}{notes} } qw(nfs ext4);
  push @failed, "nfs: DROP DATABASE with a file held open gave $held_nfs->{drop}, left $held_nfs->{left}"
    unless $held_nfs->{drop} eq "errno: 39" && $held_nfs->{left} =~ /^\.nfs/;
  push @failed, "ext4: DROP DATABASE with a file held open gave $held_ext4->{drop}"
    unless $held_ext4->{drop} eq "ok";
  if (@failed) { print STDERR "mariadb-on-mimicfs: $_\n" for @failed; exit 1 }
  print "mariadb-on-mimicfs: nfs refused $nfs->{fallocate_refused} fallocate calls and the table stayed in one extent; ideal refused none\n";
  print "mariadb-on-mimicfs: DROP DATABASE with a table held open: nfs $held_nfs->{drop} ($held_nfs->{left}left), ext4 ok\n";
  printf "mariadb-on-mimicfs: DROP TABLE unlink time, page-compressed / plain: xfs %.2fx, ext4 %.2fx\n",
    $punched / $plain, $row{"drop_page_compressed_table/ext4"}{unlink_emulated_ns} / $row{"drop_plain_table/ext4"}{unlink_emulated_ns};
' <<<"$json"
