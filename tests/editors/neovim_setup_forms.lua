-- Headless Neovim, as a new user with the five real repositories' patterns (issue 36's
-- Done-when): for each model in $TV_MODELS ([{file, symbol}]), open its file, run the
-- "Open as Graph" lens of its symbol (no profile yet: the server opens the viewer's setup
-- form) and record the answer and the URL Neovim is asked to open; the test fills and
-- saves that form in Chromium, which captures through this Neovim's server. After model
-- N the results go to $TV_DIR/stepN.json, and the script waits for $TV_DIR/goN (serving
-- the LSP meanwhile). A failure goes to $TV_DIR/error.json.
local dir = assert(os.getenv("TV_DIR"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local models = vim.json.decode(assert(os.getenv("TV_MODELS")))
local result = { opened = {}, progress = {}, messages = {}, models = {} }

local function write_json(name, data)
  local tmp = dir .. "/" .. name .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(data))
  fh:close()
  os.rename(tmp, dir .. "/" .. name)
end

local function step(n)
  write_json("step" .. n .. ".json", result)
  assert(vim.wait(300000, function() return vim.uv.fs_stat(dir .. "/go" .. n) ~= nil end, 100),
    "the test never said go" .. n)
end

local function finish(err)
  if err then write_json("error.json", { error = err, result = result }) end
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  vim.ui.open = function(url)
    table.insert(result.opened, url)
    return { wait = function() return { code = 0 } end }, nil
  end
  local progress = vim.lsp.handlers["$/progress"]
  vim.lsp.handlers["$/progress"] = function(e, params, ctx)
    local v = params.value or {}
    if v.kind == "begin" or v.kind == "end" then
      table.insert(result.progress, { kind = v.kind, title = v.title, message = v.message })
    end
    return progress(e, params, ctx)
  end
  local show_message = vim.lsp.handlers["window/showMessage"]
  vim.lsp.handlers["window/showMessage"] = function(e, params, ctx)
    table.insert(result.messages, params.message)
    return show_message(e, params, ctx)
  end

  vim.cmd.edit(ws .. "/" .. models[1].file)
  local id = assert(vim.lsp.start({ name = "tensorviz", cmd = cmd, root_dir = ws }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")

  local function run(command, args, bufnr, timeout)
    local answered, answer, failure = false, nil, nil
    client:exec_cmd({ title = command, command = command, arguments = args }, { bufnr = bufnr },
      function(e, res) answered, answer, failure = true, res, e end)
    assert(vim.wait(timeout or 150000, function() return answered end, 100), command .. " never answered")
    assert(failure == nil, command .. " failed: " .. vim.inspect(failure))
    return answer
  end

  run("tensorviz.trustWorkspace", {}, vim.api.nvim_get_current_buf(), 30000)

  for n, m in ipairs(models) do
    vim.cmd.edit(ws .. "/" .. m.file)
    local buf = vim.api.nvim_get_current_buf()
    vim.lsp.buf_attach_client(buf, id)
    -- The lens of the symbol (a file has several: Whisper's encoder, decoder and model).
    local lens
    assert(vim.wait(60000, function()
      vim.lsp.codelens.refresh({ bufnr = buf })
      vim.wait(300)
      for _, l in ipairs(vim.lsp.codelens.get(buf)) do
        local a = l.command and l.command.arguments and l.command.arguments[1]
        if type(a) == "table" and a.symbol == m.symbol then lens = l end
      end
      return lens ~= nil
    end, 100), "no code lens for " .. m.symbol .. " in " .. m.file)
    local answer = run(lens.command.command, lens.command.arguments, buf)
    table.insert(result.models, { file = m.file, symbol = m.symbol, lens = lens.command.title, answer = answer })
    step(n)
  end
end)
finish(not ok and tostring(err) or nil)
