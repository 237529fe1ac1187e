# Prints the test files of one of SQLite's test suites (permutations.test's
# test_suite definitions: veryquick, quick, ...), one file name a line.
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
foreach f $spec(-files) { puts [file tail $f] }
exit 0
