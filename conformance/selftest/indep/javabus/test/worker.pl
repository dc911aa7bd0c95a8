#!/usr/bin/perl
# Test worker for javabus: NDJSON JSON-RPC on stdin/stdout, diagnostics on stderr.
# Options: --tag T, --ignore-term, --die-immediately, --quiet
# Behaviour by request method (see README.md "Tests").
use strict;
use warnings;
use JSON::PP;
use IO::Handle;

my ($tag, $ignore_term, $die, $quiet) = ('w', 0, 0, 0);
while (@ARGV) {
    my $a = shift @ARGV;
    if ($a eq '--tag') { $tag = shift @ARGV }
    elsif ($a eq '--ignore-term') { $ignore_term = 1 }
    elsif ($a eq '--die-immediately') { $die = 1 }
    elsif ($a eq '--quiet') { $quiet = 1 }
}
STDOUT->autoflush(1);
binmode STDIN; binmode STDOUT;
print STDERR "worker[$tag] pid $$ starting\n" unless $quiet;
exit 1 if $die;
$SIG{TERM} = $ignore_term ? 'IGNORE' : sub { print STDERR "worker[$tag] pid $$ SIGTERM\n" unless $quiet; exit 0 };

my $J = JSON::PP->new->canonical(1);
sub out { print $J->encode($_[0]), "\n" }

while (my $line = <STDIN>) {
    chomp $line;
    next if $line =~ /^\s*$/;
    my $m = eval { $J->decode($line) };
    if (!$m || ref $m ne 'HASH') { print STDERR "worker[$tag]: bad input\n"; next }
    my $id = $m->{id};
    my $sid = $m->{sessionId};
    my $meth = $m->{method} // '';
    my $p = $m->{params} // {};
    my %base = (jsonrpc => '2.0');
    $base{sessionId} = $sid if defined $sid;
    if ($meth eq 'crash') { exit 3 }
    if ($meth eq 'exit0') { exit 0 }
    if ($meth eq 'garbage') { print "this is not json\n"; next }
    if ($meth eq 'stall') { sleep 1000 while 1 }
    if ($meth eq 'hold') { next }
    if ($meth eq 'sleep') { select(undef, undef, undef, ($p->{ms} // 100) / 1000) }
    if ($meth eq 'notify') {
        out({ %base, method => 'progress', params => { pid => $$, tag => $tag } });
    }
    if ($meth eq 'badsession') {
        out({ jsonrpc => '2.0', method => 'progress', sessionId => 'no-such-session' });
    }
    if ($meth eq 'orphan') {
        out({ jsonrpc => '2.0', id => 'nonexistent-id', result => {} });
        out({ jsonrpc => '2.0', method => 'loose/notification' });
    }
    if ($meth eq 'rawreply' && defined $id) {
        # deliberately odd but valid JSON formatting, to check pass-through
        print '{ "id" : ' . $J->encode([$id]) =~ s/^\[|\]$//gr . ' ,"result":{"k":"\u00e9\u20ac","x":[1,2.50,-0e0]}  }' . "\n";
        next;
    }
    next unless defined $id;   # notification from client: no reply
    my %res = (pid => $$, tag => $tag, method => $meth);
    $res{raw} = $line unless $meth eq 'small';
    $res{data} = 'x' x $p->{n} if $meth eq 'big';
    out({ %base, id => $id, result => \%res });
}
print STDERR "worker[$tag] pid $$ stdin EOF\n" unless $quiet;
exit 0;
