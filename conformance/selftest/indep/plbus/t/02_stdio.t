use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

my $cfg = write_config(instances => 2);
{
    my $bus = start_bus(config => $cfg, no_mode_flag => 1);   # stdio is the default
    # pass-through: odd spacing and key order must arrive unchanged at the worker (worker echoes nothing raw,
    # so check the response bytes instead via 'raw' method)
    $bus->send_raw(qq({"id":1,"method":"a"}\n\n   \n{ "method" : "b" , "id" : "two" }\n));
    my @l = $bus->read_lines(2);
    my %by = map { my $m = jdec($_); ($m->{id} => $m) } @l;
    is($by{1}{result}{method}, 'a', 'numeric id response');
    is($by{two}{result}{method}, 'b', 'string id response');
    isnt($by{1}{result}{pid}, $by{two}{result}{pid}, 'round robin across two workers');
    # worker output bytes forwarded unchanged
    my $odd = qq({ "id" : 7 ,  "result":{"z":1,"a":[ 1 , 2 ]}, "sessionId":null }\n);
    $bus->send_raw(jenc({ id => 7, method => 'raw', params => { text => $odd } }) . "\n");
    is($bus->read_line . "\n", $odd, 'worker bytes forwarded unchanged');
    # request is pending again? (raw without reply consumed the pending entry) - send notification (no id)
    $bus->send_raw(qq({"method":"notifications/initialized"}\n));
    # server->client notification via session
    $bus->send_raw(qq({"id":8,"method":"notify","sessionId":"S","params":{"count":3}}\n));
    my @m = map { jdec($_) } $bus->read_lines(4);
    is(scalar(@m), 4, 'three notifications + response');
    is_deeply([ map { $_->{params}{i} } @m[0..2] ], [1,2,3], 'notifications in order');
    is($m[3]{id}, 8, 'then response');
    unlike($bus->log_text, qr/^\{/m, 'nothing JSON on stderr');
    # stdin EOF with pending request: response still delivered, then exit 0
    $bus->send_raw(qq({"id":9,"method":"sleep","params":{"ms":400}}\n));
    $bus->close_stdin;
    my $r = $bus->read_line(5);
    ok($r && jdec($r)->{id} == 9, 'response delivered after stdin EOF');
    is($bus->read_line(5), undef, 'stdout closed afterwards');
    is($bus->wait_exit, 0, 'exit 0 after stdin EOF');
    like($bus->log_text, qr/end of input on stdin/, 'logged');
}
{
    # malformed client input in stdio mode closes the client -> daemon exits 0
    my $bus = start_bus(config => $cfg);
    $bus->send_raw(qq({"id":1,"method":"a"}\n));
    ok($bus->read_line, 'first ok');
    $bus->send_raw(qq({"id":2,"method":"a"\n));
    is($bus->read_line(3), undef, 'stdout closed after malformed input');
    is($bus->wait_exit, 0, 'exit 0');
    like($bus->log_text, qr/WARN .*closing connection: input is not valid JSON/, 'warned');
}
{
    # partial trailing line at EOF is discarded
    my $bus = start_bus(config => $cfg);
    $bus->send_raw(qq({"id":1,"method":"a"}));
    $bus->close_stdin;
    is($bus->read_line(3), undef, 'unterminated message not forwarded');
    is($bus->wait_exit, 0, 'exit 0');
    like($bus->log_text, qr/without terminating newline/, 'discard logged');
}
{
    # SIGTERM in stdio mode
    my $bus = start_bus(config => $cfg);
    $bus->signal('TERM');
    is($bus->wait_exit, 0, 'SIGTERM: exit 0');
    like($bus->log_text, qr/shutting down \(termination signal/, 'shutdown logged');
    $bus = start_bus(config => $cfg);
    $bus->signal('INT');
    is($bus->wait_exit, 0, 'SIGINT: exit 0');
}
done_testing;
