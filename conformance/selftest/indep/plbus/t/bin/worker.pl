#!/usr/bin/perl
no warnings "recursion";
# Test worker for plbus: speaks NDJSON on stdin/stdout; behaviour by method.
use strict; use warnings;
use JSON::PP;
use POSIX ();
$| = 1;
my $J = JSON::PP->new->utf8->canonical->max_depth(100000);
my %opt = map { $_ => 1 } @ARGV;
$SIG{TERM} = 'IGNORE' if $opt{'--ignore-term'};
my $termed = 0;
if ($opt{'--slow-term'}) { $SIG{TERM} = sub { $termed = 1 } }   # finish work, exit 1s after EOF
if ($opt{'--crash-at-start'}) { exit 3 }
if ($opt{'--garbage-at-start'}) { print "this is not json\n" }
print STDERR "worker $$ started\n" if $opt{'--chatty'};
while (my $line = <STDIN>) {
    chomp $line;
    next unless length $line;
    my $m = eval { $J->decode($line) };
    if (!$m || ref $m ne 'HASH') { print STDERR "worker $$: bad input\n"; next }
    my $method = $m->{method} // '';
    my $sid = $m->{sessionId} // (ref $m->{params} eq 'HASH' ? $m->{params}{sessionId} : undef);
    my $p = ref $m->{params} eq 'HASH' ? $m->{params} : {};
    my $reply = sub {
        my ($res) = @_;
        return unless exists $m->{id};
        my $r = { jsonrpc => '2.0', id => $m->{id}, result => $res };
        $r->{sessionId} = $m->{sessionId} if defined $m->{sessionId};
        print $J->encode($r), "\n";
    };
    if ($method eq 'crash') { exit($p->{code} // 1) }
    elsif ($method eq 'exit0') { exit 0 }
    elsif ($method eq 'garbage') { print "{not json at all\n" }
    elsif ($method eq 'nonobject') { print "[1,2,3]\n"; $reply->({ok => 1}) }
    elsif ($method eq 'later') {    # answer after params.ms without blocking the next requests
        $SIG{CHLD} = 'IGNORE';
        my $pid = fork;
        if (defined $pid && !$pid) { select(undef, undef, undef, ($p->{ms} // 100) / 1000); $reply->({pid => getppid(), params => $m->{params}, sid => $sid}); POSIX::_exit(0) }
    }
    elsif ($method eq 'sleep') { select(undef, undef, undef, ($p->{ms} // 100) / 1000); $reply->({slept => $p->{ms}, pid => $$}) }
    elsif ($method eq 'big') { $reply->({data => ('x' x ($p->{size} // 1000))}) }
    elsif ($method eq 'wrongid') { print $J->encode({jsonrpc => '2.0', id => 'no-such-id', result => 1}), "\n"; $reply->({pid => $$}) }
    elsif ($method eq 'unroutable') { print $J->encode({jsonrpc => '2.0', method => 'lost'}), "\n"; $reply->({pid => $$}) }
    elsif ($method eq 'notify') {
        for my $i (1 .. ($p->{count} // 1)) {
            my $n = { jsonrpc => '2.0', method => 'progress', params => { i => $i } };
            if ($p->{as_params}) { $n->{params}{sessionId} = $p->{target} // $sid } else { $n->{sessionId} = $p->{target} // $sid }
            print $J->encode($n), "\n";
        }
        $reply->({pid => $$, notified => $p->{count} // 1});
    }
    elsif ($method eq 'stall') { $reply->({pid => $$}); sleep 3600 }
    elsif ($method eq 'stderr') { print STDERR "diagnostic from $$\n"; $reply->({pid => $$}) }
    elsif ($method eq 'raw') { print $p->{text}; $reply->({pid => $$}) if $p->{reply} }
    elsif ($method eq 'reply_then_exit') { $reply->({pid => $$}); exit 0 }
    elsif ($method eq "noreply") { }
    elsif ($method eq "ping") { $reply->({pid => $$}) }
    elsif ($method eq "closeout") { close STDOUT; sleep 3600 }
    elsif ($method eq 'reply_twice') { $reply->({pid => $$}); $reply->({pid => $$}) }
    else { $reply->({pid => $$, method => $method, params => $m->{params}, sid => $sid}) }
}
# end of input
sleep 1 if $opt{'--slow-term'};
sleep 3600 if $opt{'--linger'};   # ignore EOF on stdin
exit 0;
