# Prints the test files of one of SQLite's test suites (permutations.test's
# test_suite definitions: veryquick, quick, ...), one a line, as paths
# relative to the source tree (test/x.test, ext/fts5/test/y.test).
# usage: testfixture list-suite.tcl TESTDIR SUITE
# (run in a scratch directory: tester.tcl opens test.db in the current one)
set testdir [lindex $argv 0]
set suite [lindex $argv 1]
# permutations.test runs a suite only when it is the script testfixture
# was given; as argv0 names another file, it only defines them.
set argv0 [file join $testdir list-suite]
set argv {}
source $testdir/permutations.test
array set spec $::testspec($suite)
# Files of test/ come as bare names, the others as paths through testdir.
set root [file normalize [file dirname $testdir]]
foreach f $spec(-files) {
  if {[file tail $f] eq $f} {
    puts test/$f
  } else {
    set f [file normalize $f]
    puts [string range $f [string length $root/] end]
  }
}
exit 0
