use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;
use Time::HiRes qw(sleep time);

{   # input buffer limit, exact boundary
    my $cfg = write_config(instances => 1, limits => { max_input_buffer => 1000 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $mk = sub { my $n = shift; my $base = jenc({ id => 1, method => 'ping', params => { p => '' } }); my $pad = $n - length $base; jenc({ id => 1, method => 'ping', params => { p => 'a' x $pad } }) };
    my $c = $bus->connect;
    my $l1000 = $mk->(1000); is(length $l1000, 1000, 'line of 1000 bytes');
    $c->send($l1000);
    is($c->read_msg->{id}, 1, 'exactly max_input_buffer bytes accepted');
    $c->send($mk->(1001));
    ok($c->is_closed(3), '1001 bytes: connection closed');
    ok($bus->wait_log(qr/ERROR .*client#\d+\(fd=\d+\): closing connection: input buffer limit exceeded \(1001 > 1000/), 'ERROR with connection context');
    # unterminated stream longer than the limit
    my $d = $bus->connect;
    $d->send_raw('{"id":2,"method":"x","params":"' . ('b' x 1500));
    ok($d->is_closed(3), 'unterminated oversize input: closed');
    # worker output over the limit: worker is failed and restarted
    my $e = $bus->connect;
    $e->send({ id => 3, method => 'big', params => { size => 5000 } });
    ok($bus->wait_log(qr/ERROR .*worker 0\/echo\(pid=\d+\): input buffer limit exceeded/), 'worker overflow logged');
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 2 }), 'worker restarted');
    $e->send({ id => 4, method => 'x' });
    is($e->read_msg->{id}, 4, 'served after restart');
    is($bus->stop, 0, 'exit 0');
}
{   # backpressure: a client that does not read -> worker paused -> timeout closes the client
    my $cfg = write_config(instances => 1, limits => { max_output_queue => 65536, backpressure_timeout_sec => 1 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $slow = $bus->connect;
    $slow->send(map { { id => $_, method => 'big', params => { size => 100000 } } } 1 .. 40);
    ok($bus->wait_log(qr/WARN .*client#\d+.*output queue full \(\d+ >= 65536 bytes\); applying backpressure/), 'queue full -> backpressure');
    ok($bus->wait_log(qr/DEBUG .*worker 0\/echo\(pid=\d+\): paused: destination client/), 'worker reading paused');
    my $other = $bus->connect;
    $other->send({ id => 'o', method => 'x' });
    my $t0 = time;
    ok($bus->wait_log(qr/ERROR .*closing connection: output queue full for 1s \(backpressure timeout\)/, 5), 'backpressure timeout closes client');
    my $m = $other->read_msg(5);
    is($m && $m->{id}, 'o', 'other client served once the stalled one is gone');
    ok($slow->is_closed(2), 'slow client connection closed');
    is($bus->stop, 0, 'exit 0');
}
{   # backpressure released when the client catches up; nothing lost
    my $cfg = write_config(instances => 1, limits => { max_output_queue => 65536, backpressure_timeout_sec => 30 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send(map { { id => $_, method => 'big', params => { size => 50000 } } } 1 .. 60);
    ok($bus->wait_log(qr/applying backpressure/), 'backpressure applied');
    sleep 0.5;
    my @m = $c->read_msgs(60, 10);
    is(scalar @m, 60, 'all 60 large responses received');
    is_deeply([ map { $_->{id} } @m ], [ 1 .. 60 ], 'in order');
    ok(!grep({ length($_->{result}{data}) != 50000 } @m), 'payloads intact');
    ok($bus->wait_log(qr/backpressure released/), 'release logged');
    is($bus->stop, 0, 'exit 0');
}
{   # a worker that stops reading stdin: client paused, worker failed after timeout and restarted
    my $cfg = write_config(instances => 1, limits => { max_output_queue => 65536, backpressure_timeout_sec => 1 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 's', method => 'stall' });
    is($c->read_msg->{id}, 's', 'stall acknowledged');
    my $chunk = join('', map { jenc({ method => 'n', params => { pad => 'p' x 1000 } }) . "\n" } 1 .. 100);
    $c->{s}->blocking(0);
    my $sent = 0; my $end = time + 3; my $buf = '';
    while (time < $end) {
        $buf .= $chunk if length($buf) < 65536;
        my $n = syswrite($c->{s}, $buf); if ($n) { $sent += $n; substr($buf, 0, $n, '') } sleep 0.01;
        last if $bus->log_text =~ /worker 0\/echo\(pid=\d+\): output queue full/;
    }
    # finish the partially written message so the stream stays valid
    my $i = index($buf, "\n");
    my $rest = $i >= 0 ? substr($buf, 0, $i + 1) : '';
    my $wend = time + 10;
    while (length $rest && time < $wend) { my $n = syswrite($c->{s}, $rest); if ($n) { substr($rest, 0, $n, '') } else { sleep 0.05 } }
    $c->{s}->blocking(1);
    ok($bus->wait_log(qr/WARN .*worker 0\/echo\(pid=\d+\): output queue full/), 'worker stdin queue full');
    ok($bus->wait_log(qr/ERROR .*stdin queue full for 1s \(backpressure timeout\); terminating worker/, 5), 'stalled worker terminated');
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 2 }, 5), 'restarted');
    # drain whatever else the client had in flight, then it works again
    sleep 0.5;
    $c->send({ id => 'after', method => 'x' });
    my $got; for (1 .. 50) { my $m = $c->read_msg(3) or last; if (($m->{id} // '') eq 'after') { $got = 1; last } }
    ok($got, 'client served by the restarted worker');
    is($bus->stop, 0, 'exit 0');
}
done_testing;
